# spelunk — the two commands: `make demo` (main job on a bundled recording) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: help deps demo test build fmt-check clippy unit

help:
	@echo "make demo   decode the bundled SPE recording and print a summary"
	@echo "make test   install what tests need, then fmt check, clippy, all tests"

deps:
	@scripts/ensure-deps.sh

build: deps
	$(CARGO) build --release --locked -p spelunk

demo: build
	@echo "(demo is wired up in a later step)"

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked

test: deps fmt-check clippy unit
