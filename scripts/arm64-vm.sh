#!/usr/bin/env bash
# Boots Debian's own arm64 kernel under qemu-system-aarch64 (-M virt -cpu neoverse-n1
# -icount shift=0, so the real armv8_pmuv3 driver counts and instructions == cycles), with an
# initramfs whose /init runs tests/vm/test.sh, and fails on any "FAIL" line or on a timeout.
# Recipe: docs in tests/vm/README.md. Needs: scripts/ensure-deps.sh vm (run as root).
# Downloads (kernel, busybox) are cached under target/vm/ so reruns are fast.
#   SPELUNK_VM_NO_SPELUNK=1 skips the static aarch64 spelunk build (harness-only run).
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
(cd "$cache/debs"
 ls "${kpkg}"_*arm64.deb >/dev/null 2>&1 || apt-get download "$kpkg:arm64"
 ls busybox-static_*arm64.deb >/dev/null 2>&1 || apt-get download busybox-static:arm64)
kdir="$cache/kernel"
if [ ! -d "$kdir/boot" ]; then
  mkdir -p "$kdir" && dpkg-deb -x "$cache"/debs/"${kpkg}"_*arm64.deb "$kdir"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n1)
bbdir="$cache/busybox"
[ -x "$bbdir/bin/busybox" ] || { mkdir -p "$bbdir"; dpkg-deb -x "$cache"/debs/busybox-static_*arm64.deb "$bbdir"; }

rootfs="$cache/root"
rm -rf "$rootfs" && mkdir -p "$rootfs"/{bin,proc,sys,dev,tmp}
cp "$bbdir/bin/busybox" "$rootfs/bin/busybox"
install -m 755 tests/vm/init "$rootfs/init"
cp tests/vm/test.sh "$rootfs/test.sh"
aarch64-linux-gnu-gcc -static -O1 -o "$rootfs/workload" tests/vm/workload.c
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
  -m 1G -smp 1 -nic none -nographic -no-reboot -kernel "$vmlinuz" -initrd "$cache/initrd.gz" \
  -append "console=ttyAMA0 panic=-1 quiet" > "$log" 2>&1 || true
tr -d '\r' < "$log" | sed -n '/^VM-BEGIN/,/^VM-END/p'
if ! grep -q '^VM-END' "$log"; then
  echo "arm64-vm: the VM did not finish (timeout or crash); see $log" >&2; exit 1
fi
if grep -q '^FAIL' "$log" || ! grep -q '^VM-END rc=0' "$log"; then
  echo "arm64-vm: checks failed in the VM" >&2; exit 1
fi
echo "arm64-vm: all checks passed"
