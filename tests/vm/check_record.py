#!/usr/bin/env python3
"""Host-side check of a perf.data that `spelunk record` wrote inside the arm64 VM against the
spe-stub kernel module: Linux perf (6.1, Debian's linux-perf, an independent decoder) must find
exactly the SPE records the module wrote while the command ran, and the AUX loss flags it
raised.

The module numbers every record it writes (a global sequence number `seq`) and puts it in the
data virtual address: VA = 0xffff00000000 + seq * 64 (tests/vm/spe-stub/spe_stub.c). The VM
prints the module's counters before and after the recording; the records written in between
are seq before..after-1, all of which must be in the perf.data, each once.

Usage: check_record.py PERF_DATA FIRST_SEQ COUNT COLLISIONS TRUNCATIONS
Prints "ok ..." / "FAIL ..." lines; exits 1 on any failure.
"""
import re
import subprocess
import sys

VA_BASE = 0xFFFF00000000


def main():
    path, first, count, collisions, truncations = sys.argv[1], *map(int, sys.argv[2:6])
    out = subprocess.run(
        ["perf", "report", "-D", "-i", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
    ).stdout
    fails = 0

    def check(cond, what):
        nonlocal fails
        print(("ok " if cond else "FAIL ") + what)
        fails += 0 if cond else 1

    seqs = []
    for m in re.finditer(r"^\.\s+[0-9a-f]+:\s+b2(?:\s+[0-9a-f]{2}){8}\s+VA 0x([0-9a-f]+)", out, re.M):
        seqs.append((int(m.group(1), 16) - VA_BASE) // 64)
    flags = [int(f, 16) for f in re.findall(r"PERF_RECORD_AUX offset: \S+ size: \S+ flags: (0x[0-9a-f]+|0)", out)]
    got_trunc = sum(1 for f in flags if f & 0x1)
    got_coll = sum(1 for f in flags if f & 0x8)
    expected = list(range(first, first + count))
    check(count > 0, f"the module wrote records during the recording ({count})")
    check(len(seqs) == count, f"perf 6.1 decodes {len(seqs)} SPE records, the module wrote {count}")
    check(sorted(seqs) == expected, "the decoded records are exactly the module's, each once "
          f"(seq {first}..{first + count - 1})")
    check(got_trunc == truncations, f"TRUNCATED AUX records in the perf.data: {got_trunc}, module: {truncations}")
    check(got_coll == collisions, f"COLLISION AUX records in the perf.data: {got_coll}, module: {collisions}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
