# Runs inside the VM (busybox sh). Every check prints "ok ..." or "FAIL ..."; the host
# harness (scripts/arm64-vm.sh) fails on any FAIL or on a missing VM-END line.
fail=0
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }
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
exit $fail
