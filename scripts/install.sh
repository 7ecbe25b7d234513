#!/usr/bin/env bash
# Installs spelunk under PREFIX (default /usr/local), so that the installed binary works outside
# the source tree, --emulate and the runtime included:
#   PREFIX/bin/spelunk
#   PREFIX/lib/spelunk/libspelunk.so, libnmo.so     (the LD_PRELOAD runtime; docs/runtime.md)
#   PREFIX/lib/spelunk/emulator/                     (the Valgrind tool; needs valgrind on PATH)
#   PREFIX/include/spelunk.h, nmo.h                  (the annotation headers)
#   PREFIX/share/man/man1/spelunk*.1                 (man pages)
#   PREFIX/share/bash-completion/completions/spelunk, zsh and fish completions
# The binary finds the runtime and the emulator at ../lib/spelunk next to itself.
# Usage: scripts/install.sh [PREFIX]        (make install PREFIX=...)
#   SPELUNK_INSTALL_NO_EMULATOR=1 skips the emulator (it needs valgrind's build dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-${PREFIX:-/usr/local}}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
cargo="${CARGO:-cargo}"
"$cargo" build --release --locked -p spelunk
install -D -m 755 target/release/spelunk "$prefix/bin/spelunk"
OUT="$prefix/lib/spelunk" runtime/build.sh >/dev/null
install -D -m 644 include/spelunk.h "$prefix/include/spelunk.h"
install -D -m 644 include/nmo.h "$prefix/include/nmo.h"
if [ "${SPELUNK_INSTALL_NO_EMULATOR:-0}" != 1 ]; then
  arch=$([ "$(uname -m)" = aarch64 ] && echo arm64 || echo amd64)
  [ -f "emulator/build/lib/spelunk-$arch-linux" ] || emulator/build.sh
  mkdir -p "$prefix/lib/spelunk/emulator"
  cp -R emulator/build/lib/. "$prefix/lib/spelunk/emulator/"
fi
"$prefix/bin/spelunk" man "$prefix/share/man/man1" >/dev/null
mkdir -p "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
         "$prefix/share/fish/vendor_completions.d"
"$prefix/bin/spelunk" completions bash > "$prefix/share/bash-completion/completions/spelunk"
"$prefix/bin/spelunk" completions zsh > "$prefix/share/zsh/site-functions/_spelunk"
"$prefix/bin/spelunk" completions fish > "$prefix/share/fish/vendor_completions.d/spelunk.fish"
echo "installed spelunk in $prefix (binary: $prefix/bin/spelunk)"
