#!/usr/bin/env bash
# Builds the spelunk Valgrind tool and its preload library.
#
#   emulator/build.sh [--clean]
#
# Outputs (paths relative to the repository root):
#   emulator/build/spelunk-<arch>-linux           the tool (e.g. spelunk-amd64-linux)
#   emulator/build/lib/                            a VALGRIND_LIB directory: the tool, its
#                                                  vgpreload_spelunk-<arch>-linux.so, and links
#                                                  to every file of the system's Valgrind libexec
#   emulator/build/model_test                      native unit tests of the model
# Run a program under it with emulator/spelunk-emu (or VALGRIND_LIB=emulator/build/lib
# valgrind --tool=spelunk ...). Needs gcc and Valgrind 3.19+ with its tool headers and static
# libraries (Debian/Ubuntu: apt-get install valgrind). Works on x86-64 and aarch64 hosts.
#
# Cross-building (emulator/cross-test-arm64.sh does this): SL_ARCH=amd64|arm64 chooses the
# guest/host architecture instead of the machine's, SL_BUILD_DIR the output directory, CC the
# compiler, and VG_INC / VG_LIBDIR / VG_LIBEXEC that architecture's Valgrind files.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${SL_BUILD_DIR:-$here/build}"
src="$here/src"

if [[ "${1:-}" == "--clean" ]]; then rm -rf "$out"; exit 0; fi

case "${SL_ARCH:-$(uname -m)}" in
  x86_64|amd64) arch=amd64; defs="-DVGA_amd64=1 -DVGO_linux=1 -DVGP_amd64_linux=1 -DVGPV_amd64_linux_vanilla=1" ;;
  aarch64|arm64) arch=arm64; defs="-DVGA_arm64=1 -DVGO_linux=1 -DVGP_arm64_linux=1 -DVGPV_arm64_linux_vanilla=1" ;;
  *) echo "spelunk emulator: unsupported architecture ${SL_ARCH:-$(uname -m)}" >&2; exit 1 ;;
esac

VG_INC="${VG_INC:-/usr/include/valgrind}"
VG_LIBEXEC="${VG_LIBEXEC:-/usr/libexec/valgrind}"
if [[ -z "${VG_LIBDIR:-}" ]]; then
  triple=$([[ $arch == arm64 ]] && echo aarch64 || echo x86_64)
  for d in /usr/lib/$triple-linux-gnu/valgrind /usr/lib/valgrind /usr/lib64/valgrind /usr/libexec/valgrind; do
    if [[ -f "$d/libcoregrind-$arch-linux.a" ]]; then VG_LIBDIR="$d"; break; fi
  done
fi
if [[ ! -f "$VG_INC/pub_tool_basics.h" || -z "${VG_LIBDIR:-}" ]]; then
  echo "spelunk emulator: Valgrind tool headers/static libraries not found (install valgrind;" \
       "set VG_INC / VG_LIBDIR)" >&2
  exit 1
fi
if [[ ! -d "$VG_LIBEXEC" ]]; then
  VG_LIBEXEC="$(dirname "$(readlink -f "$(command -v valgrind)")")/../libexec/valgrind"
fi

CC="${CC:-gcc}"
mkdir -p "$out/obj" "$out/lib"
warn="-Wall -Wextra -Werror=implicit-function-declaration"
# The tool runs inside Valgrind's address space with no libc: no PIE/PIC, no stack protector,
# no builtins (recipe of the Valgrind tool build).
tflags="$defs -fno-pie -fno-PIC -fno-stack-protector -fno-builtin -fno-strict-aliasing -O2 -g \
  -isystem $VG_INC $warn"
# one translation unit (sl_unity.c includes the model, the writer and the tool)
objs=("$out/obj/sl_unity.o")
"$CC" $tflags -c "$src/sl_unity.c" -o "$out/obj/sl_unity.o"
"$CC" -static -nodefaultlibs -nostartfiles -u _start -Wl,--build-id=none \
  -Wl,-Ttext-segment=0x58000000 "${objs[@]}" \
  "$VG_LIBDIR/libcoregrind-$arch-linux.a" "$VG_LIBDIR/libvex-$arch-linux.a" -lgcc \
  "$VG_LIBDIR/libgcc-sup-$arch-linux.a" -o "$out/spelunk-$arch-linux"

# The preload library: the annotation ABI implemented with client requests and the allocator
# wrappers (no libc). No identical-code folding: each wrapper must stay a function of its own,
# since Valgrind finds wrappers by their symbol names.
"$CC" -shared -fPIC -O2 -g -nostdlib -fno-stack-protector -fno-ipa-icf -isystem "$VG_INC" $warn \
  -Wl,-z,noexecstack "$src/sl_preload.c" -o "$out/vgpreload_spelunk-$arch-linux.so"

# VALGRIND_LIB directory: the system's Valgrind files plus ours.
for f in "$VG_LIBEXEC"/*; do
  ln -sfn "$(readlink -f "$f")" "$out/lib/$(basename "$f")"
done
cp -f "$out/spelunk-$arch-linux" "$out/vgpreload_spelunk-$arch-linux.so" "$out/lib/"

# Native unit tests of the model (same sources, libc instead of Valgrind).
"$CC" -DSL_NATIVE -O1 -g $warn -Wno-unused-function -I"$src" \
  "$here/tests/model_test.c" "$src/sl_model.c" -o "$out/model_test"

echo "built $out/spelunk-$arch-linux (VALGRIND_LIB=$out/lib)"
