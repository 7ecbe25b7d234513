#!/usr/bin/env python3
"""Writes the machine trees `spelunk check --sysroot` tests replay (README.md: where each
fact comes from). Run from this directory: python3 make_machines.py (rewrites every tree)."""
import json, os, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
TELEMETRY = os.path.join(HERE, "../../../data/telemetry")

def events_of(spec):
    """The events armv8_pmuv3 lists under events/ on that core: the specification's common
    events (0x0000-0x003F, 0x4000-0x403F: the PMCEID ranges); the kernel never lists
    implementation-defined ones."""
    d = json.load(open(os.path.join(TELEMETRY, spec + ".json")))
    out = {}
    for name, v in d["events"].items():
        if "code" in v:
            code = int(v["code"], 16)
            if code < 0x40 or 0x4000 <= code < 0x4040:
                out[name.lower()] = code
    return out

SPE_FORMAT = {  # the arm_spe_pmu driver's format/ files (kernel ABI)
    "ts_enable": "config:0", "pa_enable": "config:1", "pct_enable": "config:2",
    "jitter": "config:16", "branch_filter": "config:32", "load_filter": "config:33",
    "store_filter": "config:34", "event_filter": "config1:0-63", "min_latency": "config2:0-11",
}
ROOT_STATUS = "Name:\tbash\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n"
USER_STATUS = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n"

MACHINES = {
    # name: midr, cpus, spec (events listed by the core PMU; None = only `events`), spe caps
    # (None = no SPE), extra
    "graviton2-metal": dict(midr="0x00000000413fd0c1", cpus=4, spec="neoverse-n1",
        spe={"arch_inst": "0", "count_size": "12", "ernd": "0", "min_interval": "1024"},
        dmi=("Amazon EC2", "c6g.metal"), meltdown="Not affected", paranoid=2, status=USER_STATUS,
        nodes=[0], kernel="6.1.0-27-arm64"),
    "graviton3-metal": dict(midr="0x00000000411fd401", cpus=4, spec="neoverse-v1",
        spe={"arch_inst": "0", "count_size": "12", "ernd": "1", "min_interval": "1024"},
        dmi=("Amazon EC2", "c7g.metal"), meltdown="Not affected", paranoid=2, status=USER_STATUS,
        nodes=[0], kernel="6.1.0-27-arm64"),
    "graviton4-metal": dict(midr="0x00000000410fd4f1", cpus=4, spec="neoverse-v2",
        spe={"arch_inst": "0", "count_size": "12", "ernd": "1", "min_interval": "1024"},
        dmi=("Amazon EC2", "c8g.metal-24xl"), meltdown="Not affected", paranoid=2,
        status=ROOT_STATUS, nodes=[0], kernel="6.8.0-1015-aws"),
    "altra-ubuntu": dict(midr="0x00000000413fd0c1", cpus=4, spec="neoverse-n1",
        spe={"arch_inst": "0", "count_size": "12", "ernd": "0", "min_interval": "1024"},
        dmi=("Ampere Computing", "Mt.Jade"), meltdown="Not affected", paranoid=4,
        status=USER_STATUS, nodes=[0], kernel="6.8.0-45-generic"),
    "grace": dict(midr="0x00000000410fd4f0", cpus=4, spec="neoverse-v2",
        spe={"arch_inst": "0", "count_size": "12", "ernd": "1", "min_interval": "1024"},
        dmi=("NVIDIA", "Grace CPU Superchip"), meltdown="Not affected", paranoid=2,
        status=ROOT_STATUS, nodes=[0, 1], kernel="6.5.0-1019-nvidia-64k"),
    "cobalt100-vm": dict(midr="0x000000006d0fd490", cpus=4, spec="neoverse-n2", spe=None,
        dmi=("Microsoft Corporation", "Virtual Machine"), meltdown="Not affected", paranoid=2,
        status=USER_STATUS, nodes=[0], kernel="6.8.0-1017-azure"),
    "graviton2-vm": dict(midr="0x00000000413fd0c1", cpus=2, spec="neoverse-n1", spe=None,
        dmi=("Amazon EC2", "c6g.xlarge"), meltdown="Not affected", paranoid=2,
        status=USER_STATUS, nodes=[0], kernel="6.1.0-27-cloud-arm64"),
    "kpti-on": dict(midr="0x00000000413fd0c1", cpus=2, spec="neoverse-n1", spe=None,
        dmi=("Ampere Computing", "Mt.Jade"), meltdown="Mitigation: PTI", paranoid=2,
        status=ROOT_STATUS, nodes=[0], kernel="6.1.0-27-arm64", driver=True),
    "qemu-neoverse-n1": dict(midr="0x00000000414fd0c1", cpus=2, spec=None, spe=None,
        dmi=None, dt="linux,dummy-virt", meltdown="Not affected", paranoid=3,
        status=ROOT_STATUS, nodes=[0], kernel="6.1.0-28-arm64", driver=True),
}

def write(root, rel, text):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text if text.endswith("\n") or text == "" else text + "\n")

def build(name, m):
    root = os.path.join(HERE, name)
    shutil.rmtree(root, ignore_errors=True)
    n = m["cpus"]
    for c in range(n):
        write(root, f"sys/devices/system/cpu/cpu{c}/regs/identification/midr_el1", m["midr"])
    write(root, "sys/devices/system/cpu/vulnerabilities/meltdown", m["meltdown"])
    pmu = f"sys/bus/event_source/devices/armv8_pmuv3_0"
    write(root, pmu + "/type", "8")
    write(root, pmu + "/cpus", f"0-{n - 1}")
    events = events_of(m["spec"]) if m["spec"] else {
        # QEMU 7.2's -cpu neoverse-n1 PMU (arm64-vm facts): these four only
        "cpu_cycles": 0x11, "inst_retired": 0x08, "stall_backend": 0x24, "stall_frontend": 0x23}
    for ev, code in events.items():
        write(root, f"{pmu}/events/{ev}", f"event=0x{code:04x}")
    if m["spe"] is not None:
        spe = "sys/bus/event_source/devices/arm_spe_0"
        write(root, spe + "/type", "9")
        write(root, spe + "/cpumask", f"0-{n - 1}")
        for k, v in m["spe"].items():
            write(root, f"{spe}/caps/{k}", v)
        for k, v in SPE_FORMAT.items():
            write(root, f"{spe}/format/{k}", v)
    if m["spe"] is not None or m.get("driver"):
        write(root, "sys/module/arm_spe_pmu/refcnt", "0")
    if m.get("dmi"):
        write(root, "sys/class/dmi/id/sys_vendor", m["dmi"][0])
        write(root, "sys/class/dmi/id/product_name", m["dmi"][1])
    if m.get("dt"):
        write(root, "proc/device-tree/compatible", m["dt"])
    for node in m["nodes"]:
        write(root, f"sys/devices/system/node/node{node}/cpulist", f"0-{n - 1}")
    write(root, "proc/sys/kernel/osrelease", m["kernel"])
    write(root, "proc/sys/kernel/perf_event_paranoid", str(m["paranoid"]))
    write(root, "proc/sys/kernel/perf_event_mlock_kb", "516")
    write(root, "proc/self/status", m["status"])
    write(root, "proc/self/smaps_rollup", "Rss:                4096 kB\n")

def build_x86():
    root = os.path.join(HERE, "x86-64-vm")
    shutil.rmtree(root, ignore_errors=True)
    cpu = ("processor\t: {c}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
           "flags\t\t: fpu vme de pse tsc msr pae hypervisor\n\n")
    write(root, "proc/cpuinfo", "".join(cpu.format(c=c) for c in range(2)))
    write(root, "sys/devices/system/cpu/vulnerabilities/meltdown", "Not affected")
    write(root, "sys/devices/system/node/node0/cpulist", "0-1")
    write(root, "proc/sys/kernel/osrelease", "6.1.0-27-amd64")
    write(root, "proc/sys/kernel/perf_event_paranoid", "2")
    write(root, "proc/sys/kernel/perf_event_mlock_kb", "516")
    write(root, "proc/self/status", ROOT_STATUS)
    write(root, "proc/self/smaps_rollup", "Rss:                4096 kB\n")

for name, m in MACHINES.items():
    build(name, m)
build_x86()
