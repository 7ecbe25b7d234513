#!/usr/bin/env bash
# Boots Debian's own arm64 kernel under qemu-system-aarch64 (-M virt -cpu neoverse-n1
# -icount shift=0, so the real armv8_pmuv3 driver counts and instructions == cycles), with an
# initramfs whose /init runs tests/vm/test.sh, and fails on any "FAIL" line or on a timeout.
# The initramfs also holds /spe_stub.ko (tests/vm/spe-stub, the test-only arm_spe_0 stand-in,
# cross-built here against the same kernel's Debian headers) and /aux_probe, its self-test.
# Files the VM hands back with vm_export (test.sh) land in target/vm/out/.
# Recipe: docs in tests/vm/README.md. Needs: scripts/ensure-deps.sh vm (run as root).
# Downloads (kernel, headers, busybox) are cached under target/vm/ so reruns are fast.
#   SPELUNK_VM_NO_SPELUNK=1 skips the static aarch64 spelunk build (harness-only run).
#   SPELUNK_VM_APPEND adds to the kernel command line (spelunk.bench=1: the recorder benchmark,
#   scripts/bench-recorder.sh, instead of the tests).
#   SPELUNK_VM_SMP=N boots N CPUs (default 1; -icount runs them in turn on one host thread).
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
scripts/ensure-deps.sh vm
cache=target/vm
mkdir -p "$cache/debs"
# The kernel package name moves with Debian's security updates: look it up, never pin it.
kpkg=$(apt-cache depends linux-image-arm64:arm64 2>/dev/null \
         | sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*-arm64\).*/\1/p' | head -n1)
[ -n "$kpkg" ] || { echo "arm64-vm: cannot find Debian's arm64 kernel package (dpkg --add-architecture arm64; apt-get update)" >&2; exit 1; }
# The headers for building tests/vm/spe-stub against exactly this kernel: same ABI name NN.
kver=${kpkg#linux-image-}                       # 6.1.0-NN-arm64
hpkg=linux-headers-$kver
hcommon=linux-headers-${kver%-arm64}-common
(cd "$cache/debs"
 ls "${kpkg}"_*arm64.deb >/dev/null 2>&1 || apt-get download "$kpkg:arm64"
 ls busybox-static_*arm64.deb >/dev/null 2>&1 || apt-get download busybox-static:arm64
 ls "${hpkg}"_*arm64.deb >/dev/null 2>&1 || apt-get download "$hpkg:arm64"
 ls "${hcommon}"_*all.deb >/dev/null 2>&1 || apt-get download "$hcommon")
kdir="$cache/kernel"
# Re-extract when Debian moves to a new ABI: the module must match the kernel it loads into.
if [ ! -f "$kdir/boot/vmlinuz-$kver" ]; then
  rm -rf "$kdir" && mkdir -p "$kdir" && dpkg-deb -x "$cache"/debs/"${kpkg}"_*arm64.deb "$kdir"
fi
vmlinuz="$kdir/boot/vmlinuz-$kver"
bbdir="$cache/busybox"
[ -x "$bbdir/bin/busybox" ] || { mkdir -p "$bbdir"; dpkg-deb -x "$cache"/debs/busybox-static_*arm64.deb "$bbdir"; }

# Kernel headers, extracted under target/vm/headers (not /usr/src). Debian's arm64 tree is a
# thin wrapper: its Makefile includes /usr/src/<common>/Makefile (made to point at our copy)
# and its relative `scripts` link leads to ../../lib/linux-kbuild-X.Y/scripts (made to point at
# the host's linux-kbuild-X.Y, which ensure-deps installs: fixdep, modpost for any arch).
hroot="$root_dir/$cache/headers"
kbuild_dir="$hroot/usr/src/$hpkg"
if [ ! -f "$kbuild_dir/.spelunk-ready" ]; then
  rm -rf "$hroot" && mkdir -p "$hroot"
  dpkg-deb -x "$cache"/debs/"${hpkg}"_*arm64.deb "$hroot"
  dpkg-deb -x "$cache"/debs/"${hcommon}"_*all.deb "$hroot"
  kbuild_rel=$(readlink "$kbuild_dir/scripts")     # ../../lib/linux-kbuild-6.1/scripts
  kbuild_name=$(basename "$(dirname "$kbuild_rel")")
  [ -d "/usr/lib/$kbuild_name/scripts" ] \
    || { echo "arm64-vm: /usr/lib/$kbuild_name missing (apt-get install $kbuild_name)" >&2; exit 1; }
  mkdir -p "$hroot/usr/lib" && ln -sfn "/usr/lib/$kbuild_name" "$hroot/usr/lib/$kbuild_name"
  sed -i "s|^include /usr/src/|include $hroot/usr/src/|" "$kbuild_dir/Makefile"
  touch "$kbuild_dir/.spelunk-ready"
fi
# The test-only SPE stand-in, built out of the source tree (kbuild writes next to the sources).
mod_build="$cache/spe-stub"
mkdir -p "$mod_build"
cp -p tests/vm/spe-stub/Kbuild tests/vm/spe-stub/Makefile tests/vm/spe-stub/spe_stub.c "$mod_build/"
make -s -C "$mod_build" KDIR="$kbuild_dir" >"$cache/spe-stub.log" 2>&1 \
  || { cat "$cache/spe-stub.log" >&2; echo "arm64-vm: building spe_stub.ko failed" >&2; exit 1; }

rootfs="$cache/root"
rm -rf "$rootfs" && mkdir -p "$rootfs"/{bin,proc,sys,dev,tmp}
cp "$bbdir/bin/busybox" "$rootfs/bin/busybox"
install -m 755 tests/vm/init "$rootfs/init"
cp tests/vm/test.sh "$rootfs/test.sh"
aarch64-linux-gnu-gcc -static -O1 -o "$rootfs/workload" tests/vm/workload.c
aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -o "$rootfs/aux_probe" tests/vm/aux_probe.c
aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -o "$rootfs/as_user" tests/vm/as_user.c
# One SVE instruction in main: `spelunk record --emulate` must refuse it before the run.
aarch64-linux-gnu-gcc -static -O1 -Wall -Wextra -Werror -o "$rootfs/sve" tests/vm/sve.c
# A dynamically linked program with include/spelunk.h annotations, glibc's loader and libraries
# from the cross toolchain, and libspelunk.so built for aarch64 (the runtime spelunk preloads).
aarch64-linux-gnu-gcc -O1 -Wall -Wextra -Werror -Iinclude -o "$rootfs/phases" tests/vm/phases.c
mkdir -p "$rootfs/lib"
for l in ld-linux-aarch64.so.1 libc.so.6 libgcc_s.so.1 libdl.so.2 libpthread.so.0 libm.so.6; do
  [ -e "/usr/aarch64-linux-gnu/lib/$l" ] && cp -L "/usr/aarch64-linux-gnu/lib/$l" "$rootfs/lib/"
done
CC=aarch64-linux-gnu-gcc OUT="$root_dir/$cache/runtime-arm64" runtime/build.sh >/dev/null
cp "$cache/runtime-arm64/libspelunk.so" "$rootfs/lib/libspelunk.so"
cp "$mod_build/spe_stub.ko" "$rootfs/spe_stub.ko"
if [ "${SPELUNK_VM_NO_SPELUNK:-0}" != 1 ]; then
  # Static glibc: one self-contained binary for the initramfs.
  RUSTFLAGS="-C target-feature=+crt-static" \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    cargo build --locked --release -p spelunk --target aarch64-unknown-linux-gnu
  cp target/aarch64-unknown-linux-gnu/release/spelunk "$rootfs/spelunk"
fi
(cd "$rootfs" && find . | cpio -o -H newc --quiet | gzip -1 > "$root_dir/$cache/initrd.gz")

log="$cache/console.log"
echo "== booting $(basename "$vmlinuz") under qemu-system-aarch64 (log: $log)"
timeout "${SPELUNK_VM_TIMEOUT_S:-120}" qemu-system-aarch64 -M virt -cpu neoverse-n1 -icount shift=0 \
  -m 1G -smp "${SPELUNK_VM_SMP:-1}" -nic none -nographic -no-reboot -kernel "$vmlinuz" -initrd "$cache/initrd.gz" \
  -append "console=ttyAMA0 panic=-1 quiet ${SPELUNK_VM_APPEND:-}" > "$log" 2>&1 || true
# The serial console ends lines with \r\n. Exported files (vm_export in test.sh) are blocks
#   VM-EXPORT-BEGIN NAME SIZE MD5 / base64 lines / VM-EXPORT-END NAME
# decoded into target/vm/out/NAME and checked against SIZE and MD5; the checks below and the
# echoed transcript see a one-line stand-in for each block.
txt="$cache/console.txt"
tr -d '\r' < "$log" > "$txt"
out="$cache/out"
rm -rf "$out" && mkdir -p "$out"
export_bad=0
while read -r _ name size md5; do
  [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || { echo "arm64-vm: bad export name '$name'" >&2; export_bad=1; continue; }
  sed -n "/^VM-EXPORT-BEGIN $name /,/^VM-EXPORT-END $name\$/p" "$txt" | sed '1d;$d' \
    | base64 -d > "$out/$name" 2>/dev/null || true
  got_size=$(stat -c %s "$out/$name"); got_md5=$(md5sum < "$out/$name" | cut -d' ' -f1)
  if [ "$got_size" != "$size" ] || [ "$got_md5" != "$md5" ]; then
    echo "arm64-vm: export $name damaged in transit ($got_size bytes, md5 $got_md5; want $size, $md5)" >&2
    export_bad=1
  fi
done < <(grep '^VM-EXPORT-BEGIN ' "$txt")
sed -i '/^VM-EXPORT-BEGIN /,/^VM-EXPORT-END /{/^VM-EXPORT-BEGIN /!d;s/^VM-EXPORT-BEGIN \([^ ]*\) .*/(exported \1 -> target\/vm\/out\/\1)/}' "$txt"
sed -n '/^VM-BEGIN/,/^VM-END/p' "$txt"
if ! grep -q '^VM-END' "$txt"; then
  echo "arm64-vm: the VM did not finish (timeout or crash); see $log" >&2; exit 1
fi
if grep -q '^FAIL' "$txt" || ! grep -q '^VM-END rc=0' "$txt" || [ $export_bad = 1 ]; then
  echo "arm64-vm: checks failed in the VM" >&2; exit 1
fi
# The export path's smoke test: test.sh exports the first 4 KiB of /workload.
if ! cmp -s "$out/workload.head" <(head -c 4096 "$rootfs/workload"); then
  echo "arm64-vm: target/vm/out/workload.head differs from the initramfs's /workload" >&2; exit 1
fi
# spelunk record's perf.data files, decoded on the host by Linux perf (tests/vm/check_record.py):
# exactly the records the stub wrote during each recording, and its loss flags.
if [ "${SPELUNK_VM_NO_SPELUNK:-0}" != 1 ] && [[ "${SPELUNK_VM_APPEND:-}" != *spelunk.bench=1* ]]; then
  for name in rec small att; do
    if [ ! -f "$out/$name.data" ] || [ ! -f "$out/$name.expect" ]; then
      echo "arm64-vm: the VM exported no $name.data/$name.expect (spelunk record did not run)" >&2; exit 1
    fi
    echo "== perf 6.1 decodes target/vm/out/$name.data"
    # shellcheck disable=SC2046
    tests/vm/check_record.py "$out/$name.data" $(cat "$out/$name.expect") \
      || { echo "arm64-vm: $name.data does not hold what the stub wrote" >&2; exit 1; }
  done
  echo "== spelunk record --no-spe's timelines (target/vm/out/ns.sidecar.json)"
  tests/vm/check_nospe.py "$out/ns.sidecar.json" \
    || { echo "arm64-vm: the --no-spe timelines are wrong" >&2; exit 1; }
  echo "== the runtime's phases on the samples' clock (target/vm/out/ph.json)"
  tests/vm/check_phases.py "$out/ph.json" "$out/ph.sidecar.json" "$out/pt.sidecar.json" \
    || { echo "arm64-vm: the runtime's phases are not on the samples' clock" >&2; exit 1; }
fi
echo "arm64-vm: all checks passed"
