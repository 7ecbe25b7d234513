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
# scripts/bench-recorder.sh boots with spelunk.bench=1: the recorder benchmark, no tests.
if grep -q spelunk.bench=1 /proc/cmdline; then
  insmod /spe_stub.ko || { bad "insmod spe_stub.ko"; exit 1; }
  par=/sys/module/spe_stub/parameters
  secs() { # COMMAND...: guest seconds of wall time (busybox time -p)
    time -p -o /tmp/time.txt "$@" > /dev/null 2>&1
    sed -n 's/^real //p' /tmp/time.txt
  }
  for batch in 8 32 127; do
    echo $batch > $par/batch
    alone=$(secs /workload)
    /spelunk record -o /tmp/b.data -- /workload > /tmp/b.txt 2>&1 || { cat /tmp/b.txt; bad "bench record"; }
    under=$(secs /spelunk record -o /tmp/b2.data -- /workload)
    aux=$(sed -n 's/^spelunk record: [0-9]* SPE records (\([0-9.]*\) MB.*/\1/p' /tmp/b.txt)
    cpu=$(sed -n 's/^spelunk record: the recorder used \([0-9.]*\) ms of CPU while the command ran \([0-9.]*\) ms.*/\1 \2/p' /tmp/b.txt)
    echo "bench batch=$batch aux_mb=$aux recorder_cpu_ms=${cpu% *} command_ms=${cpu#* } workload_alone_s=$alone spelunk_record_total_s=$under"
  done
  echo 8 > $par/batch
  # Attached (-p) to a shell running /workload three times, against the same run as a command.
  /spelunk record -o /tmp/b3.data -- /bin/sh -c '/workload; /workload; /workload' 2>&1 \
    | sed -n 's/^spelunk record: the recorder used \([0-9.]*\) ms of CPU.*(\([0-9.]*\) ms per MB.*/bench command-3x recorder_cpu_ms=\1 per_mb_ms=\2/p'
  /bin/sh -c 'sleep 0.05; /workload; /workload; /workload' &
  /spelunk record -p $! -o /tmp/b4.data 2>&1 \
    | sed -n 's/^spelunk record: the recorder used \([0-9.]*\) ms of CPU.*(\([0-9.]*\) ms per MB.*/bench attach-3x recorder_cpu_ms=\1 per_mb_ms=\2/p'
  wait
  rmmod spe_stub
  head -c 4096 /workload > /tmp/workload.head
  vm_export /tmp/workload.head workload.head
  exit $fail
fi
# spelunk record preloads this runtime (built for aarch64 by arm64-vm.sh).
export SPELUNK_RUNTIME=/lib/libspelunk.so
pmu=/sys/bus/event_source/devices/armv8_pmuv3
[ -d "$pmu" ] && ok "armv8_pmuv3 PMU present" || bad "no armv8_pmuv3 in sysfs"
echo "events: $(ls $pmu/events 2>/dev/null | tr '\n' ' ')"
midr=$(cat /sys/devices/system/cpu/cpu0/regs/identification/midr_el1 2>/dev/null)
case "$midr" in *41?fd0c?) ok "MIDR $midr is a Neoverse N1" ;; *) bad "MIDR '$midr'" ;; esac
if [ -x /spelunk ]; then
  # What the emulator cannot run, checked on aarch64 before the emulator is looked for (none is
  # in this initramfs): /sve has one SVE instruction (ptrue) in main and no CPU check, so it is
  # refused; /workload, static like it, carries libgcc's unwinder (SVE's cntd, never run
  # without SVE frames) and passes the check, to fail next for want of the emulator.
  /spelunk record --emulate -o /tmp/sve.data -- /sve > /tmp/sve.txt 2>&1; rc=$?
  cat /tmp/sve.txt
  if [ $rc != 0 ] && grep -q '/sve: 1 SVE/SVE2 instruction (at 0x[0-9a-f]* in main); Valgrind cannot run' /tmp/sve.txt \
     && ! grep -q 'running' /tmp/sve.txt && [ ! -e /tmp/sve.data ]; then
    ok "record --emulate refuses /sve's SVE instruction before the run"
  else
    bad "record --emulate did not refuse /sve (exit $rc)"
  fi
  /spelunk record --emulate -o /tmp/plain.data -- /workload > /tmp/plain.txt 2>&1; rc=$?
  cat /tmp/plain.txt
  [ $rc != 0 ] && grep -q 'the emulator is not built' /tmp/plain.txt && ! grep -q 'SVE' /tmp/plain.txt \
    && ok "record --emulate passes the static /workload to the emulator search" \
    || bad "record --emulate on /workload: exit $rc, not the missing emulator"
  /spelunk topdown -- /workload > /tmp/td.txt 2>&1; rc=$?
  cat /tmp/td.txt
  [ $rc = 0 ] && ok "spelunk topdown ran" || bad "spelunk topdown exit $rc"
  # -icount shift=0: one instruction per cycle, so IPC is 1 (hand-derived, not from spelunk).
  grep -Eq '^ +ipc +(1\.00|0\.99)' /tmp/td.txt && ok "IPC 1.0 under -icount" || bad "IPC is not 1.0"
  # L1D_CACHE (0x04) is absent from events/ (QEMU lacks it): must be "not counted", never 0.
  grep -q 'missing_events.*L1D_CACHE' /tmp/td.txt && ok "L1D_CACHE reported not counted" \
    || bad "L1D_CACHE not reported as not counted"
  # spelunk check on a real arm64 kernel: the core is named from its MIDR, and there is no SPE
  # (QEMU has none), so SPE recording does not work here: exit status 1.
  /spelunk check > /tmp/check.txt 2>&1; rc=$?
  cat /tmp/check.txt
  [ $rc = 1 ] && ok "spelunk check exits 1 (no SPE)" || bad "spelunk check exit $rc, want 1"
  grep -Eq '^  CPUs? 0 .*neoverse-n1 \(MIDR 0x414fd0c1\)' /tmp/check.txt && ok "spelunk check names the Neoverse N1" \
    || bad "spelunk check does not name the Neoverse N1"
  grep -Eq '^  SPE +none' /tmp/check.txt && ok "spelunk check says no SPE" || bad "spelunk check does not say no SPE"
  grep -Eq '^  spe-record +NO ' /tmp/check.txt && ok "spelunk check: spe-record NO" || bad "spelunk check: spe-record not NO"
  # No SPE: spelunk record --no-spe records the timelines (capacity from numa_maps, counters
  # through armv8_pmuv3) with the runtime's phases; the host checks them (check_nospe.py).
  /spelunk record --no-spe --capacity-interval 5 -o /tmp/ns.data -- /phases > /tmp/ns.txt 2>&1; rc=$?
  cat /tmp/ns.txt
  [ $rc = 0 ] && ok "spelunk record --no-spe ran" || bad "spelunk record --no-spe exit $rc"
  vm_export /tmp/ns.data.spelunk.json ns.sidecar.json
  /spelunk report /tmp/ns.data > /tmp/ns-report.txt 2>&1 && ok "spelunk report reads the --no-spe sidecar" \
    || { cat /tmp/ns-report.txt; bad "spelunk report of the --no-spe recording"; }
  head -n 30 /tmp/ns-report.txt
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
  # spelunk record against the stub: the host decodes the exported perf.data with perf 6.1
  # and compares it with the records the module wrote during the run (tests/vm/check_record.py).
  if [ -x /spelunk ]; then
    stub_record() { # NAME OPTIONS...: record /workload, export NAME.data and NAME.expect
      name=$1; shift
      b_inj=$(cat $par/injected); b_col=$(cat $par/collisions); b_tr=$(cat $par/truncations)
      /spelunk record "$@" -o /tmp/$name.data -- /workload > /tmp/$name.txt 2>&1; rc=$?
      a_inj=$(cat $par/injected); a_col=$(cat $par/collisions); a_tr=$(cat $par/truncations)
      cat /tmp/$name.txt
      [ $rc = 0 ] && ok "spelunk record $name: exit 0 (the command's status)" || bad "spelunk record $name: exit $rc"
      n=$((a_inj - b_inj)); col=$((a_col - b_col)); tr=$((a_tr - b_tr))
      echo "$b_inj $n $col $tr" > /tmp/$name.expect
      echo "spe_stub during $name: first=$b_inj injected=$n collisions=$col truncations=$tr"
      # spelunk's own summary must agree with the module (the host checks perf's decode).
      grep -q "^spelunk record: $n SPE records " /tmp/$name.txt && ok "spelunk record $name: summary says $n records" \
        || bad "spelunk record $name: summary does not say $n records"
      vm_export /tmp/$name.data $name.data
      vm_export /tmp/$name.expect $name.expect
    }
    echo 7 > $par/collide_every
    stub_record rec
    echo 0 > $par/collide_every
    # 2-page AUX area (127 records), 200 records per tick: every tick overflows it, so
    # TRUNCATED records must be counted and sampling must resume after each (the recorder
    # re-enables the event). One tick per 2 ms keeps the file small (about 50 ticks).
    echo 200 > $par/batch; echo 2000 > $par/period_us
    stub_record small --aux-pages 2
    echo 8 > $par/batch; echo 200 > $par/period_us
    # The runtime on a real kernel: spelunk record preloads libspelunk.so into a dynamically
    # linked program annotated with include/spelunk.h; its phases, object and heap block reach
    # the sidecar on the samples' clock (the host checks samples per phase against the stub's
    # fixed rate: tests/vm/check_phases.py).
    /spelunk record -o /tmp/ph.data -- /phases > /tmp/ph.txt 2>&1; rc=$?
    cat /tmp/ph.txt
    [ $rc = 0 ] && grep -q "^phases: runtime loaded" /tmp/ph.txt && ok "spelunk record preloads the runtime" \
      || bad "spelunk record with the runtime: exit $rc"
    grep -Eq "the runtime logged 2 phase\(s\), 1 named object\(s\) and [1-9][0-9]* heap block\(s\) from 1 process" /tmp/ph.txt \
      && ok "the runtime's phases, object and heap block are merged" || bad "runtime logs not merged as expected"
    /spelunk report /tmp/ph.data --json > /tmp/ph.json 2>/tmp/ph-report.err || { cat /tmp/ph-report.err; bad "report ph.data"; }
    vm_export /tmp/ph.json ph.json
    vm_export /tmp/ph.data.spelunk.json ph.sidecar.json
    # With resident memory and counters every 5 ms (the reader then takes CPU time from the
    # program on this one-CPU VM, so the phases stretch: a separate recording).
    /spelunk record --capacity-interval 5 -o /tmp/pt.data -- /phases > /tmp/pt.txt 2>&1 \
      && ok "spelunk record with timelines" || { cat /tmp/pt.txt; bad "spelunk record with timelines"; }
    vm_export /tmp/pt.data.spelunk.json pt.sidecar.json
    # Attach (-p) to a running shell that starts /workload three times: the events follow its
    # later children (inherit) and recording ends when it does. The stub writes records only
    # while an event is active, so the counters' difference is again exactly the file's records.
    b_inj=$(cat $par/injected); b_col=$(cat $par/collisions); b_tr=$(cat $par/truncations)
    /bin/sh -c 'sleep 0.05; /workload; /workload; /workload' &
    target=$!
    /spelunk record -p $target -o /tmp/att.data > /tmp/att.txt 2>&1; rc=$?
    wait $target
    a_inj=$(cat $par/injected); a_col=$(cat $par/collisions); a_tr=$(cat $par/truncations)
    cat /tmp/att.txt
    [ $rc = 0 ] && grep -q "^spelunk record: $((a_inj - b_inj)) SPE records" /tmp/att.txt \
      && ok "spelunk record -p: attached, followed the children, ended with the process" \
      || bad "spelunk record -p: exit $rc"
    echo "$b_inj $((a_inj - b_inj)) $((a_col - b_col)) $((a_tr - b_tr))" > /tmp/att.expect
    vm_export /tmp/att.data att.data
    vm_export /tmp/att.expect att.expect
    # What goes wrong, said clearly. SPE has one user per CPU: while a system-wide recording
    # holds CPU 0, a second recording must fail with EBUSY's reason.
    /spelunk record -a -o /tmp/hold.data -- /workload > /tmp/hold.txt 2>&1 &
    holder=$!
    sleep 0.02
    /spelunk record -o /tmp/busy.data -- /workload > /tmp/busy.txt 2>&1; rc=$?
    wait $holder; hrc=$?
    cat /tmp/busy.txt
    [ $rc != 0 ] && grep -q "another program already uses arm_spe_0 on CPU 0" /tmp/busy.txt \
      && ok "a second SPE user is refused with the reason (EBUSY)" || bad "EBUSY: exit $rc, message above"
    [ $hrc = 0 ] && grep -q "^spelunk record: [1-9][0-9]* SPE records" /tmp/hold.txt \
      && ok "spelunk record -a: recorded while holding the device" || { cat /tmp/hold.txt; bad "spelunk record -a: exit $hrc"; }
    # A killed command: its status passes through (128+9) and the perf.data holds what ran.
    /spelunk record -o /tmp/kill.data -- /bin/sh -c '/workload; kill -9 $$' > /tmp/kill.txt 2>&1; rc=$?
    cat /tmp/kill.txt
    [ $rc = 137 ] && ok "killed command: exit 137" || bad "killed command: exit $rc, want 137"
    /spelunk report /tmp/kill.data > /tmp/kill-report.txt 2>&1 \
      && grep -Eq "samples: [1-9][0-9]* decoded" /tmp/kill-report.txt \
      && ok "killed command: spelunk report reads its perf.data" || { cat /tmp/kill-report.txt; bad "killed command: no readable perf.data"; }
    # Unprivileged. Debian's default perf_event_paranoid 3 forbids every event: the error says
    # so and what to do. At 2, a user may record its own command in user mode; pa_enable is
    # privileged, so it is dropped with one note and the recording goes on.
    mkdir -p /tmp/user && chmod 777 /tmp/user
    old_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
    echo 3 > /proc/sys/kernel/perf_event_paranoid
    /as_user 1000 /spelunk record -o /tmp/user/p3.data -- /workload > /tmp/p3.txt 2>&1; rc=$?
    cat /tmp/p3.txt
    [ $rc != 0 ] && grep -q "perf_event_paranoid is 3" /tmp/p3.txt \
      && ok "unprivileged at paranoid 3: refused with the reason" || bad "paranoid 3: exit $rc"
    echo 2 > /proc/sys/kernel/perf_event_paranoid
    /as_user 1000 /spelunk record -o /tmp/user/p2.data -- /workload > /tmp/p2.txt 2>&1; rc=$?
    cat /tmp/p2.txt
    [ $rc = 0 ] && grep -q "note: pa_enable (--pa) was refused" /tmp/p2.txt \
      && grep -q "^spelunk record: [1-9][0-9]* SPE records" /tmp/p2.txt \
      && ok "unprivileged at paranoid 2: records, pa_enable dropped with a note" || bad "paranoid 2: exit $rc"
    echo "$old_paranoid" > /proc/sys/kernel/perf_event_paranoid
    # Disk full: a 128 KiB tmpfs cannot hold the recording (about 330 KB). The error names the
    # cause, the command still runs to its end, and what was written is kept under another
    # name (never over an older recording) and reads as a cut file.
    mkdir -p /tmp/full && mount -t tmpfs -o size=128k tmpfs /tmp/full
    /spelunk record -o /tmp/full/f.data -- /workload > /tmp/full.txt 2>&1; rc=$?
    cat /tmp/full.txt
    [ $rc != 0 ] && grep -qi "no space left on device" /tmp/full.txt \
      && grep -q "kept as /tmp/full/f.data.partial" /tmp/full.txt \
      && ok "disk full: the error names the cause and the partial file" || bad "disk full: exit $rc"
    [ ! -e /tmp/full/f.data ] && ok "disk full: no f.data pretends to be complete" || bad "disk full: f.data exists"
    /spelunk report /tmp/full/f.data.partial > /tmp/full-report.txt 2>&1
    cat /tmp/full-report.txt | head -n 12
    grep -Eq "samples: [1-9][0-9]* decoded" /tmp/full-report.txt && grep -qi "data size is 0" /tmp/full-report.txt \
      && ok "disk full: spelunk report reads the partial file and says it was cut" || bad "disk full: partial file not read"
    umount /tmp/full
    grep -Eq '^spelunk record: the AUX buffer filled [1-9][0-9]* time' /tmp/small.txt \
      && ok "spelunk record small: full buffers reported" || bad "spelunk record small: no full-buffer report"
  fi
  counters="spe_stub injected=$(cat $par/injected) dropped=$(cat $par/dropped) collisions=$(cat $par/collisions) truncations=$(cat $par/truncations)"
  echo "$counters"
  echo "$counters" > /tmp/spe_stub_counters
  vm_export /tmp/spe_stub_counters spe_stub_counters
  rmmod spe_stub && ok "rmmod spe_stub" || bad "rmmod spe_stub failed"
  # The PMU gone: recording now says there is no SPE, and what to do.
  if [ -x /spelunk ]; then
    /spelunk record -o /tmp/gone.data -- /workload > /tmp/gone.txt 2>&1; rc=$?
    [ $rc != 0 ] && grep -q "this machine has no SPE PMU" /tmp/gone.txt && [ ! -e /tmp/gone.data ] \
      && ok "SPE PMU gone: a clear error, no file" || { cat /tmp/gone.txt; bad "SPE PMU gone: exit $rc"; }
  fi
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
