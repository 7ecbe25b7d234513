#!/usr/bin/env bash
# Installs what building and testing spelunk needs on a fresh Debian or Ubuntu machine (apt), or
# the core packages on Amazon Linux 2023 / Fedora (dnf), run as root, and says exactly what is
# missing otherwise. Idempotent: installs only what is absent.
#   scripts/ensure-deps.sh            core: Rust toolchain parts, Linux perf, valgrind, gcc
#   scripts/ensure-deps.sh cross      + aarch64 cross toolchain and qemu-user
#   scripts/ensure-deps.sh vm         + qemu-system-arm, cpio, aarch64 cross gcc, linux-kbuild-6.1,
#                                       the arm64 apt architecture (for Debian's arm64 kernel and
#                                       its headers, scripts/arm64-vm.sh)
#   scripts/ensure-deps.sh fuzz       + nightly toolchain and cargo-fuzz
#   scripts/ensure-deps.sh python     + python3 and pip, pyarrow, pandas, pytest, jsonschema (the
#                                       Python tests read our Parquet and check our JSON against
#                                       its schemas), maturin (builds the package `spelunk`:
#                                       pip install --no-build-isolation .) and duckdb (the
#                                       embedded engine of `spelunk fleet report`), matplotlib
#                                       (spelunk.plot), nbclient, nbformat, ipykernel (the example
#                                       notebook, run by tests/python/test_notebook.py)
#   scripts/ensure-deps.sh spark      + Debian's openjdk-17-jre-headless and pyspark (pip), for
#                                       the fleet tables on Spark in local mode (tests/python)
#   scripts/ensure-deps.sh browser    + Debian's chromium, Node.js, playwright-core (npm) for the
#                                       HTML report test (tests/browser); never downloads a browser
set -euo pipefail

want_apt=()
want_python=0
want_spark=0
need_cmd() { command -v "$1" >/dev/null 2>&1; }

# Linux perf 6.1 (Debian package linux-perf) is the independent SPE decoder our tests compare with.
if ! need_cmd perf || ! perf version >/dev/null 2>&1; then want_apt+=(linux-perf); fi
# Valgrind (tool headers and static libraries included) and gcc build the SPE/PMU emulator.
need_cmd valgrind && [ -f /usr/include/valgrind/pub_tool_basics.h ] || want_apt+=(valgrind)
need_cmd gcc || want_apt+=(gcc)
need_cmd make || want_apt+=(make)
for mode in "$@"; do
  case "$mode" in
    cross)
      need_cmd aarch64-linux-gnu-gcc || want_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
      need_cmd qemu-aarch64 || want_apt+=(qemu-user)
      ;;
    python)
      need_cmd python3 || want_apt+=(python3)
      python3 -m pip --version >/dev/null 2>&1 || want_apt+=(python3-pip)
      want_python=1
      ;;
    spark)
      # pyspark 4 runs on Java 17 or later: Debian 12's default JRE.
      java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
      [ "${java_major:-0}" -ge 17 ] 2>/dev/null || want_apt+=(openjdk-17-jre-headless)
      need_cmd python3 || want_apt+=(python3)
      python3 -m pip --version >/dev/null 2>&1 || want_apt+=(python3-pip)
      want_spark=1
      ;;
    browser)
      [ -x /usr/bin/chromium ] || want_apt+=(chromium fonts-liberation)
      need_cmd node || want_apt+=(nodejs)
      need_cmd npm || want_apt+=(npm)
      ;;
    vm)
      need_cmd qemu-system-aarch64 || want_apt+=(qemu-system-arm)
      need_cmd cpio || want_apt+=(cpio)
      # fixdep/modpost for cross-building tests/vm/spe-stub against Debian's arm64 headers.
      [ -x /usr/lib/linux-kbuild-6.1/scripts/mod/modpost ] || want_apt+=(linux-kbuild-6.1)
      need_cmd aarch64-linux-gnu-gcc || want_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
      if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [ "$(id -u)" = 0 ] || { echo "spelunk's VM test needs: sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2; exit 1; }
        dpkg --add-architecture arm64
        apt-get update -qq
      fi
      ;;
    fuzz|core|"") ;;
    *) echo "ensure-deps: unknown mode '$mode'" >&2; exit 2 ;;
  esac
done

# Amazon Linux 2023, Fedora, RHEL: dnf, for the core packages (the test-only modes need Debian).
if ((${#want_apt[@]})) && ! need_cmd apt-get && need_cmd dnf; then
  want_dnf=()
  for p in "${want_apt[@]}"; do
    case "$p" in
      linux-perf) want_dnf+=(perf) ;;
      valgrind) want_dnf+=(valgrind valgrind-devel) ;;
      gcc|make) want_dnf+=("$p") ;;
      *) echo "ensure-deps: '$p' is needed for this test mode, which is set up on Debian or Ubuntu only" >&2; exit 1 ;;
    esac
  done
  if [ "$(id -u)" != 0 ]; then
    echo "spelunk needs these packages: ${want_dnf[*]}" >&2
    echo "install them with: sudo dnf install -y ${want_dnf[*]}" >&2
    exit 1
  fi
  echo "ensure-deps: installing ${want_dnf[*]}"
  dnf install -y -q "${want_dnf[@]}" >/dev/null
  want_apt=()
fi

if ((${#want_apt[@]})); then
  if ! need_cmd apt-get; then
    echo "spelunk needs: ${want_apt[*]} (Debian package names; this machine has neither apt-get nor dnf: install their equivalents)" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "spelunk needs these Debian packages: ${want_apt[*]}" >&2
    echo "install them with: sudo apt-get install -y ${want_apt[*]}" >&2
    exit 1
  fi
  echo "ensure-deps: installing ${want_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${want_apt[@]}" >/dev/null
fi

# Python packages, with pip once apt has installed it. The versions: what the tests and
# pyproject.toml need (pyarrow >= 15 reads Arrow C streams; maturin 1.9+ builds the package).
if ((want_python)) && ! python3 - 2>/dev/null <<'PY'
import importlib.metadata as md
def at_least(name, want):
    have = tuple(int(x) for x in md.version(name).split(".")[:2] if x.isdigit())
    return have >= want
import pyarrow, pandas, pytest, jsonschema, maturin, duckdb, matplotlib, nbclient, nbformat, ipykernel
assert at_least("pyarrow", (15, 0)) and at_least("maturin", (1, 9))
assert not at_least("maturin", (2, 0)) and at_least("duckdb", (1, 1))
PY
then
  echo "ensure-deps: installing pyarrow, pandas, pytest, jsonschema, maturin, duckdb, matplotlib, nbclient, nbformat, ipykernel (pip)"
  "$(dirname "$0")/pip-install.sh" "pyarrow>=15" pandas pytest jsonschema "maturin>=1.9,<2" "duckdb>=1.1" \
    "matplotlib>=3.5" nbclient nbformat ipykernel \
    || { echo "spelunk's Python tests need: python3 -m pip install 'pyarrow>=15' pandas pytest jsonschema 'maturin>=1.9,<2' 'duckdb>=1.1' 'matplotlib>=3.5' nbclient nbformat ipykernel" >&2; exit 1; }
fi
if ((want_spark)) && ! python3 -c 'import pyspark' 2>/dev/null; then
  echo "ensure-deps: installing pyspark (pip)"
  "$(dirname "$0")/pip-install.sh" "pyspark>=3.5" \
    || { echo "spelunk's Spark test needs: python3 -m pip install 'pyspark>=3.5'" >&2; exit 1; }
fi

if ! need_cmd cargo; then
  echo "spelunk needs Rust (cargo). Install it from https://rustup.rs and re-run." >&2
  exit 1
fi
if need_cmd rustup; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
  for mode in "$@"; do
    case "$mode" in
      cross|vm) rustup target list --installed | grep -q '^aarch64-unknown-linux-gnu$' \
               || rustup target add aarch64-unknown-linux-gnu ;;
      fuzz)  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
             need_cmd cargo-fuzz || cargo install --locked cargo-fuzz ;;
    esac
  done
fi

# playwright-core (pinned in tests/browser/package-lock.json) drives /usr/bin/chromium; it has no
# install scripts and never fetches a browser of its own.
browser_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
for mode in "$@"; do
  if [ "$mode" = browser ] && ! node -e "const d='$browser_dir/'; process.exit(
      require(d + 'node_modules/playwright-core/package.json').version ===
      require(d + 'package.json').devDependencies['playwright-core'] ? 0 : 1)" 2>/dev/null; then
    echo "ensure-deps: installing playwright-core (npm ci in tests/browser)"
    (cd "$browser_dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
      npm ci --no-audit --no-fund --loglevel=error) \
      || { echo "spelunk's browser test needs: (cd tests/browser && npm ci)" >&2; exit 1; }
  fi
done
