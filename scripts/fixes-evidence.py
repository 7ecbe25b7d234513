#!/usr/bin/env python3
"""Per-PC evidence for the fixes suite, from the files scripts/fixes-record.sh writes.

    scripts/fixes-evidence.py OUTDIR [NAME...] [--top N] [--markdown]

For each NAME (default: every NAME.data.spelunk.json in OUTDIR) it reads NAME-ldst.csv and
NAME-br.csv (`spelunk decode -f csv`), NAME.json (`spelunk report --json --limit 500`, used only
to map PCs to function+offset and source lines) and NAME.data.spelunk.json (the emulator's
counter totals), and prints:

- the run: emulated CPU_CYCLES (all cores), END_TIME_NS (the emulated wall time of the run),
  INST_RETIRED, load ops per level (ground truth);
- per memory PC, the N with the most summed total latency (loads) or samples (stores):
  samples, mean and p50 total latency, mean translation latency, data-source shares, the share
  of samples with TLB-REFILL (a walk), ALIGNMENT, L1D-REFILL and LLC-REFILL (served beyond L2)
  events; the dominant address delta between consecutive samples of the PC in one thread (its
  share of the deltas), the gcd of the non-zero deltas, stride75: the largest g dividing at
  least 75 % of the non-zero deltas (with its share), near-stride: the largest g such that 75 %
  of them are within min(64, g/16) bytes of a multiple of g (finds a column walk's row stride
  although the walk moves by one element between columns), the distinct 8-byte-aligned offsets
  within the 64-byte line that the samples touch (count, and the most common ones), how many
  threads sampled the PC;
- per conditional-branch PC (the 3 with most samples): samples and mispredicted share;
- the lines (64 B) sampled by more than one thread with different offsets per thread (the
  false-sharing view), when there are any.

Everything is computed from the samples only (no ground truth beyond the run totals).
Python 3 standard library only.
"""
import csv
import json
import math
import os
import statistics
import sys
from collections import Counter, defaultdict

LINE = 64


def load_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def pc_map(report):
    """(base, {address: (key, file:line)}) from the report's instruction table."""
    instrs = (report.get("hotspots") or {}).get("instructions") or []
    table = {}
    for r in instrs:
        if r.get("address") is None:
            continue
        where = f"{os.path.basename(r['file'])}:{r['line']}" if r.get("file") else "?"
        table[int(r["address"])] = (r.get("key") or "?", where, r.get("dso") or "")
    return table


def find_base(table, pcs):
    """The load bias of the main program: the (page-aligned) pc - address that maps the most
    sampled PCs onto instructions of the report's table."""
    votes = Counter()
    addrs = set(table)
    for pc in pcs:
        for a in addrs:
            d = pc - a
            if d >= 0 and d % 4096 == 0:
                votes[d] += 1
    if not votes:
        return None
    return votes.most_common(1)[0][0]


def gcd_all(values):
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g


def near_stride(deltas):
    """(g, share): the largest g such that at least 75 % of the non-zero deltas are within
    min(64, g/16) bytes of a multiple of g. Consecutive samples of one PC are many iterations
    apart, so a column walk's deltas are k x row_stride plus a few elements whenever the walk
    moved to the next column(s) between the two samples: exact divisibility fails on those,
    nearness does not. Candidates as in robust_stride."""
    nz = [abs(d) for d in deltas if d]
    if len(nz) < 5:
        return (0, 0.0)
    cands = {1 << k for k in range(31)}
    cands |= {math.gcd(a, b) for a, b in zip(nz, nz[1:])}
    best, share = 0, 0.0
    for g in cands:
        tol = min(64, g // 16)
        k = sum(min(d % g, g - d % g) <= tol for d in nz)
        if g > best and k >= 0.75 * len(nz):
            best, share = g, pct(k, len(nz))
    return (best, share)


def robust_stride(deltas):
    """(g, share): the largest g such that at least 75 % of the non-zero deltas are multiples of g;
    candidates: powers of two up to 2^30 and the gcd of each pair of consecutive deltas (so a
    48-byte stride is found too). Robust to the few deltas that cross a row or column end,
    which take the plain gcd down to the element size."""
    nz = [abs(d) for d in deltas if d]
    if len(nz) < 5:
        return (0, 0.0)
    cands = {1 << k for k in range(31)}
    cands |= {math.gcd(a, b) for a, b in zip(nz, nz[1:])}
    best, share = 0, 0.0
    for g in cands:
        k = sum(d % g == 0 for d in nz)
        if g > best and k >= 0.75 * len(nz):
            best, share = g, pct(k, len(nz))
    return (best, share)


def pct(x, n):
    return 100.0 * x / n if n else 0.0


def analyse_mem(rows, top):
    by_pc = defaultdict(list)
    for r in rows:
        if r["pc"] and r["el"] in ("0", ""):
            by_pc[int(r["pc"])].append(r)
    out = []
    for pc, rs in by_pc.items():
        op = Counter(r["op"] for r in rs).most_common(1)[0][0]
        sub = Counter(r["subclass"] or "-" for r in rs).most_common(1)[0][0]
        lats = [int(r["total_lat"]) for r in rs if r["total_lat"]]
        xl = [int(r["xlat_lat"]) for r in rs if r["xlat_lat"]]
        ex = [int(r["exec_lat"]) for r in rs if r["exec_lat"]]
        il = [int(r["issue_lat"]) for r in rs if r["issue_lat"]]
        ev = [set((r["event"] or "").split(":")) for r in rs]
        n = len(rs)
        src = Counter(r["data_source"] or "-" for r in rs if r["op"] == "LD")
        # deltas between consecutive samples of this PC within one thread, in time order
        per_tid = defaultdict(list)
        for r in rs:
            if r["vaddr"]:
                per_tid[r["tid"]].append((int(r["ts"] or 0), int(r["vaddr"])))
        deltas = []
        for seq in per_tid.values():
            seq.sort()
            deltas += [b[1] - a[1] for a, b in zip(seq, seq[1:])]
        dom, dom_n = (Counter(deltas).most_common(1)[0] if deltas else (None, 0))
        g = gcd_all(abs(d) for d in deltas if d)
        g90 = robust_stride(deltas)
        gnear = near_stride(deltas)
        offs = Counter((int(r["vaddr"]) % LINE) for r in rs if r["vaddr"])
        lines = {int(r["vaddr"]) // LINE for r in rs if r["vaddr"]}
        out.append(
            {
                "pc": pc,
                "op": op,
                "subclass": sub,
                "samples": n,
                "lat_sum": sum(lats),
                "lat_mean": statistics.mean(lats) if lats else None,
                "lat_p50": statistics.median(lats) if lats else None,
                "xlat_mean": statistics.mean(xl) if xl else None,
                "sources": {k: pct(v, sum(src.values())) for k, v in src.most_common()},
                "walk": pct(sum("TLB-REFILL" in e for e in ev), n),
                "align": pct(sum("ALIGNMENT" in e for e in ev), n),
                "l1d_refill": pct(sum("L1D-REFILL" in e for e in ev), n),
                "llc_refill": pct(sum("LLC-REFILL" in e for e in ev), n),
                "late_pf": pct(sum("LATE-PREFETCH" in e or "IMPDEF-12" in e for e in ev), n),
                "dom_delta": dom,
                "dom_share": pct(dom_n, len(deltas)),
                "n_deltas": len(deltas),
                "gcd": g,
                "g90": g90,
                "gnear": gnear,
                "exec_mean": statistics.mean(ex) if ex else None,
                "exec_n": len(ex),
                "issue_mean": statistics.mean(il) if il else None,
                "offsets": offs,
                "lines": len(lines),
                "tids": len(per_tid),
            }
        )
    loads = sorted((o for o in out if o["op"] == "LD"), key=lambda o: -o["lat_sum"])
    stores = sorted((o for o in out if o["op"] != "LD"), key=lambda o: -o["samples"])
    return loads[:top], stores[:top], loads, stores


def analyse_br(rows):
    by_pc = defaultdict(list)
    for r in rows:
        if r["pc"] and r.get("condition") == "true":
            by_pc[int(r["pc"])].append(r)
    out = []
    for pc, rs in by_pc.items():
        mis = sum("MISPRED" in (r["event"] or "") for r in rs)
        out.append({"pc": pc, "samples": len(rs), "mispred": pct(mis, len(rs))})
    out.sort(key=lambda o: -o["samples"])
    total = sum(o["samples"] for o in out)
    total_mis = sum(o["samples"] * o["mispred"] / 100 for o in out)
    return out[:3], total, pct(total_mis, total)


def false_sharing_lines(rows):
    per_line = defaultdict(lambda: defaultdict(Counter))
    for r in rows:
        if r["vaddr"] and r["pc"]:
            a = int(r["vaddr"])
            per_line[a // LINE][r["tid"]][a % LINE] += 1
    out = []
    for line, tids in per_line.items():
        if len(tids) < 2:
            continue
        offsets = [set(c) for c in tids.values()]
        if any(a != b for a in offsets for b in offsets):
            out.append((sum(sum(c.values()) for c in tids.values()), line, tids))
    out.sort(reverse=True)
    return out[:3]


def describe(outdir, name, top, md):
    side = json.load(open(os.path.join(outdir, name + ".data.spelunk.json")))
    report = json.load(open(os.path.join(outdir, name + ".json")))
    ldst = load_rows(os.path.join(outdir, name + "-ldst.csv"))
    br = load_rows(os.path.join(outdir, name + "-br.csv"))
    tot = side["counters"]["totals"]
    truth = side["truth"]["totals"]
    cfg = side["config"]
    table = pc_map(report)
    loads, stores, all_loads, all_stores = analyse_mem(ldst, top)
    base = find_base(table, [o["pc"] for o in all_loads[:20] + all_stores[:10]])

    def where(pc):
        if base is not None and pc - base in table:
            k, w, _ = table[pc - base]
            return f"{k} {w}"
        return hex(pc)

    levels = ["L1D", "L2", "SLC", "DRAM", "PEER_CORE"]
    lv = " ".join(f"{l}={truth.get('TRUTH_LOAD_OPS_' + l, 0)}" for l in levels)
    run = {
        "name": name,
        "cycles": tot.get("CPU_CYCLES"),
        "end_ns": truth.get("END_TIME_NS"),
        "inst": tot.get("INST_RETIRED"),
        "page_bytes": cfg.get("page_bytes"),
        "samples": truth.get("SAMPLES_WRITTEN"),
    }
    print(f"### {name}")
    print(
        f"run: CPU_CYCLES {run['cycles']:,}  END_TIME_NS {run['end_ns']:,}  INST_RETIRED "
        f"{run['inst']:,}  page {cfg.get('page_bytes')} B  samples {run['samples']:,}  "
        f"load ops by level (truth): {lv}  DTLB_WALK {tot.get('DTLB_WALK', 0):,}  "
        f"BR_MIS_PRED_RETIRED {tot.get('BR_MIS_PRED_RETIRED', 0):,}"
    )
    hdr = (
        "| op | subclass | where | samples | lat mean | p50 | exec mean (n) | issue | xlat | sources % | walk % | "
        "align % | L1D-refill % | LLC-refill % | late-pf % | dom delta (share) | gcd | stride75 (share) | near-stride (share) | "
        "offsets in line | lines | tids |"
    )
    print(hdr)
    print("|" + "---|" * 22)
    for o in loads + stores:
        srcs = " ".join(f"{k} {v:.0f}" for k, v in o["sources"].items()) or "-"
        offs = o["offsets"]
        offs_s = f"{len(offs)}: " + ",".join(str(k) for k, _ in offs.most_common(4))
        dd = "-" if o["dom_delta"] is None else f"{o['dom_delta']} ({o['dom_share']:.0f}%)"
        f1 = lambda v: "-" if v is None else f"{v:.1f}"
        print(
            f"| {o['op']} | {o['subclass']} | {where(o['pc'])} | {o['samples']} | {f1(o['lat_mean'])} | "
            f"{f1(o['lat_p50'])} | {f1(o['exec_mean'])} ({o['exec_n']}) | {f1(o['issue_mean'])} | "
            f"{f1(o['xlat_mean'])} | {srcs} | {o['walk']:.0f} | "
            f"{o['align']:.0f} | {o['l1d_refill']:.0f} | {o['llc_refill']:.0f} | "
            f"{o['late_pf']:.0f} | {dd} | {o['gcd']} | {o['g90'][0]} ({o['g90'][1]:.0f}%) | {o['gnear'][0]} ({o['gnear'][1]:.0f}%) | {offs_s} | {o['lines']} | {o['tids']} |"
        )
    brs, brn, brmis = analyse_br(br)
    print(
        f"conditional branches: {brn} samples, {brmis:.1f}% mispredicted; top: "
        + "; ".join(f"{where(b['pc'])} {b['samples']} samples {b['mispred']:.0f}% mispred" for b in brs)
    )
    fs = false_sharing_lines(ldst)
    for n, line, tids in fs:
        desc = "; ".join(
            f"tid {t}: offsets " + ",".join(f"{k}x{v}" for k, v in sorted(c.items()))
            for t, c in tids.items()
        )
        print(f"shared line {hex(line * LINE)}: {n} samples; {desc}")
    sites = report.get("allocation_sites") or []
    for s in sites[:2]:
        print(
            f"allocation site {s['site']}: {s['blocks']} blocks, {s['bytes']:,} B, mean lifetime "
            f"{s.get('mean_lifetime_ns')} ns, {s['samples']} samples"
        )
    print()
    return run


def main(argv):
    top = 4
    md = False
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--top":
            top = int(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--markdown":
            md = True
        else:
            args.append(argv[i])
        i += 1
    if not args:
        print(__doc__)
        return 2
    outdir, names = args[0], args[1:]
    if not names:
        names = sorted(
            f[: -len(".data.spelunk.json")]
            for f in os.listdir(outdir)
            if f.endswith(".data.spelunk.json")
        )
    runs = {}
    for n in names:
        try:
            runs[n] = describe(outdir, n, top, md)
        except (OSError, ValueError, KeyError) as e:
            print(f"{n}: cannot read ({e})\n")
    print("### emulated gain (problem / fix)")
    print("| pair | CPU_CYCLES problem | fix | gain | END_TIME_NS problem | fix | gain |")
    print("|---|---|---|---|---|---|---|")
    for n, r in runs.items():
        if n.endswith("_fixed") or "_fixed_" in n:
            continue
        fixed = n.replace("_4k", "_fixed_4k") if n.endswith("_4k") else n + "_fixed"
        f = runs.get(fixed)
        if not f:
            continue
        print(
            f"| {n} | {r['cycles']:,} | {f['cycles']:,} | {r['cycles'] / f['cycles']:.2f}x | "
            f"{r['end_ns']:,} | {f['end_ns']:,} | {r['end_ns'] / f['end_ns']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
