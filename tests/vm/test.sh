# Runs inside the VM (busybox sh). Every check prints "ok ..." or "FAIL ..."; the host
# harness (scripts/arm64-vm.sh) fails on any FAIL or on a missing VM-END line.
fail=0
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }
# vm_export FILE NAME: hands FILE to the host, which decodes it into target/vm/out/NAME
# (scripts/arm64-vm.sh; NAME: letters, digits, . _ -, unique per run). The block is a marker
# line with the size and MD5, the file in base64 (busybox), and an end marker.
vm_export() {
  [ -f "$1" ] || { bad "vm_export: no file $1"; return 1; }
  echo "VM-EXPORT-BEGIN $2 $(wc -c < "$1" | tr -d ' ') $(md5sum < "$1" | cut -d' ' -f1)"
  base64 "$1"
  echo "VM-EXPORT-END $2"
}
pmu=/sys/bus/event_source/devices/armv8_pmuv3
[ -d "$pmu" ] && ok "armv8_pmuv3 PMU present" || bad "no armv8_pmuv3 in sysfs"
echo "events: $(ls $pmu/events 2>/dev/null | tr '\n' ' ')"
midr=$(cat /sys/devices/system/cpu/cpu0/regs/identification/midr_el1 2>/dev/null)
case "$midr" in *41?fd0c?) ok "MIDR $midr is a Neoverse N1" ;; *) bad "MIDR '$midr'" ;; esac
if [ -x /spelunk ]; then
  /spelunk topdown -- /workload > /tmp/td.txt 2>&1; rc=$?
  cat /tmp/td.txt
  [ $rc = 0 ] && ok "spelunk topdown ran" || bad "spelunk topdown exit $rc"
  # -icount shift=0: one instruction per cycle, so IPC is 1 (hand-derived, not from spelunk).
  grep -Eq '^ +ipc +(1\.00|0\.99)' /tmp/td.txt && ok "IPC 1.0 under -icount" || bad "IPC is not 1.0"
  # L1D_CACHE (0x04) is absent from events/ (QEMU lacks it): must be "not counted", never 0.
  grep -q 'missing_events.*L1D_CACHE' /tmp/td.txt && ok "L1D_CACHE reported not counted" \
    || bad "L1D_CACHE not reported as not counted"
else
  echo "skip spelunk topdown (no /spelunk in the initramfs)"
  /workload && ok "workload ran" || bad "workload failed"
fi

# The test-only SPE stand-in (tests/vm/spe-stub): sysfs as Linux 6.1's arm_spe_pmu, then its
# self-test through the kernel's AUX ABI (aux_probe), then unload.
if [ -f /spe_stub.ko ]; then
  insmod /spe_stub.ko && ok "insmod spe_stub.ko" || bad "insmod spe_stub.ko failed"
  spe=/sys/bus/event_source/devices/arm_spe_0
  par=/sys/module/spe_stub/parameters
  sysfs_bad=0
  want() {
    v=$(cat "$1" 2>/dev/null)
    [ "$v" = "$2" ] || { bad "${1#/sys/} is '$v', want '$2'"; sysfs_bad=1; }
  }
  for f in ts_enable=config:0 pa_enable=config:1 pct_enable=config:2 jitter=config:16 \
           branch_filter=config:32 load_filter=config:33 store_filter=config:34 \
           event_filter=config1:0-63 min_latency=config2:0-11; do
    want "$spe/format/${f%%=*}" "${f#*=}"
  done
  [ "$(ls $spe/format | wc -l)" = 9 ] || { bad "arm_spe_0/format has $(ls $spe/format | tr '\n' ' ')"; sysfs_bad=1; }
  for f in arch_inst=0 ernd=0 count_size=12 min_interval=1024; do want "$spe/caps/${f%%=*}" "${f#*=}"; done
  want "$spe/cpumask" "$(cat /sys/devices/system/cpu/possible)"
  case "$(cat $spe/type 2>/dev/null)" in [0-9]*) ;; *) bad "arm_spe_0/type missing"; sysfs_bad=1 ;; esac
  for f in injected=0 dropped=0 collisions=0 truncations=0 period_us=200 batch=8 collide_every=0; do
    want "$par/${f%%=*}" "${f#*=}"
  done
  [ $sysfs_bad = 0 ] && ok "arm_spe_0 sysfs (type $(cat $spe/type), format/, caps/, cpumask) and spe_stub parameters"
  /aux_probe; rc=$?
  [ $rc = 0 ] && ok "aux_probe exit 0" || bad "aux_probe exit $rc"
  counters="spe_stub injected=$(cat $par/injected) dropped=$(cat $par/dropped) collisions=$(cat $par/collisions) truncations=$(cat $par/truncations)"
  echo "$counters"
  echo "$counters" > /tmp/spe_stub_counters
  vm_export /tmp/spe_stub_counters spe_stub_counters
  rmmod spe_stub && ok "rmmod spe_stub" || bad "rmmod spe_stub failed"
  # A kernel warning or oops while the stub ran means a bug in the module.
  if dmesg | grep -Eq 'WARNING:|BUG:|Oops|Call trace:'; then
    dmesg | grep -E -A20 'WARNING:|BUG:|Oops' | head -n 60
    bad "kernel warnings in dmesg"
  else
    ok "no kernel warning in dmesg"
  fi
else
  bad "no /spe_stub.ko in the initramfs"
fi
# The export path's smoke test (binary): the host compares it with its copy of /workload.
head -c 4096 /workload > /tmp/workload.head
vm_export /tmp/workload.head workload.head
exit $fail
