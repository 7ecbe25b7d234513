#!/usr/bin/env bash
# Cross-builds the whole workspace for aarch64-unknown-linux-gnu (our users' platform) and runs
# the tests of the byte-level crates (SPE decoder, perf.data, decode pipeline, emulator trace
# reader, top-down) under qemu-aarch64, so Arm-only bugs (unsigned c_char, alignment,
# endianness assumptions) show up on x86 CI. Needs: scripts/ensure-deps.sh cross.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh cross
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
target=aarch64-unknown-linux-gnu
echo "== cross-build: workspace for $target"
cargo build --locked --workspace --all-targets --target "$target"
echo "== decoder, perf.data reader/writer, decode pipeline, emulator trace reader and top-down tests under qemu-aarch64"
cargo test --locked -p spelunk-spe -p spelunk-perf -p spelunk-decode -p spelunk-emutrace -p spelunk-pmu \
  --target "$target"
