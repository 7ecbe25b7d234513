# spelunk — the two commands: `make demo` (main job on a bundled recording) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: help deps demo test build fmt-check clippy unit emulator python browser cross vm fuzz-smoke bench install install-check

help:
	@echo "make demo   record STREAM under the emulated SPE, decode it, print the report (out/demo)"
	@echo "make test   install what tests need, then fmt check, clippy, all tests"

deps:
	@scripts/ensure-deps.sh

build: deps
	$(CARGO) build --release --locked -p spelunk -p spelunk-testkit

demo: build
	@scripts/demo.sh

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# SPELUNK_REQUIRE_RUNTIME: the LD_PRELOAD runtime's tests (gcc, addr2line) must run, not skip;
# SPELUNK_REQUIRE_CROSS: so must the aarch64 cases of the unsupported-instruction check (the
# cross compiler is installed here, before the `cross` stage).
unit:
	@scripts/ensure-deps.sh cross
	SPELUNK_REQUIRE_RUNTIME=1 SPELUNK_REQUIRE_CROSS=1 $(CARGO) test --workspace --locked

# The SPE/PMU emulator (Valgrind tool) and the workloads, built here; then the emulator's
# acceptance tests and `spelunk record --emulate` end to end (perf 6.1 as the oracle).
emulator:
	emulator/test.sh

# Python tests: our Parquet/CSV read by pyarrow/pandas (an independent reader), and the Python
# package `spelunk` (crates/python, docs/python.md) installed from this tree by pip as a user
# installs it (`pip install .`; here without build isolation: maturin is installed, and cargo
# reuses target/release) and checked against the CLI's outputs. The fleet tables
# (tests/python/test_fleet.py) on DuckDB and on Spark in local mode (pyspark, OpenJDK 17):
# SPELUNK_REQUIRE_SPARK makes the Spark test fail rather than skip when either is missing.
python: build
	@scripts/ensure-deps.sh python spark
	scripts/pip-install.sh --no-build-isolation .
	cd tests/python && SPELUNK_REQUIRE_SPARK=1 SPELUNK_REQUIRE_PLOTS=1 SPELUNK_REQUIRE_NOTEBOOK=1 python3 -m pytest -q

# The HTML report in headless Chromium (Debian's chromium driven by playwright-core from npm;
# no browser download): figures equal the JSON's, no request, no console error; screenshots
# under target/tmp/html-report/browser/.
browser:
	@scripts/ensure-deps.sh browser
	SPELUNK_BROWSER_TEST=1 SPELUNK_REQUIRE_EMULATOR=1 $(CARGO) test --locked -p spelunk --test html_report html_report_in_headless_chromium -- --nocapture

# Cross-build for aarch64 and run the byte-level crates' tests under qemu-aarch64; then the emulator built
# for arm64 (against Debian's valgrind:arm64) runs its acceptance tests on arm64 workloads, all
# under qemu-aarch64.
cross:
	scripts/cross-test-aarch64.sh
	emulator/cross-test-arm64.sh

# Debian's own arm64 kernel under qemu-system-aarch64 (-cpu neoverse-n1 -icount shift=0): the
# real armv8_pmuv3 driver counts a hand-countable workload under a static aarch64 spelunk, and
# spe_stub.ko, a test-only arm_spe_0, is read back through the kernel's AUX ABI
# (tests/vm/README.md). About 15 s once the static aarch64 build is cached.
vm:
	scripts/arm64-vm.sh

# Install under PREFIX (default /usr/local): the binary, the runtime and the emulator where the
# installed binary finds them, headers, man pages, completions (scripts/install.sh).
PREFIX ?= /usr/local
install: deps
	scripts/install.sh "$(PREFIX)"

# `make install` into a temporary prefix, then the installed binary used from outside the tree.
install-check:
	scripts/install-check.sh

# A short run of every fuzz target (FUZZ_SECONDS each, default 30).
fuzz-smoke:
	scripts/fuzz-smoke.sh

# Benchmarks (not part of `make test`): criterion/divan benches and the end-to-end scripts.
bench:
	$(CARGO) bench --locked -p spelunk-spe --bench decode

test: deps fmt-check clippy unit emulator python browser cross vm install-check fuzz-smoke
