#!/usr/bin/env bash
# Builds spelunk's LD_PRELOAD runtime: runtime/build/libspelunk.so, and libnmo.so (a link to it,
# so programs built against NMO's API with -lnmo run unchanged; see include/nmo.h).
#   runtime/build.sh            (CC overrides the compiler; OUT the output directory)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cc="${CC:-gcc}"
out="${OUT:-$here/build}"
mkdir -p "$out"
"$cc" -std=gnu11 -O2 -g -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden \
  -fno-optimize-sibling-calls -fno-omit-frame-pointer \
  -o "$out/libspelunk.so.tmp" "$here/src/spelunk_rt.c" -ldl -lpthread
mv -f "$out/libspelunk.so.tmp" "$out/libspelunk.so"
ln -sf libspelunk.so "$out/libnmo.so"
echo "built $out/libspelunk.so"
