# Switchyard: `make bench` and `make test` are the two commands; both set up
# what they need on a fresh Debian machine (apt packages when run as root, a
# Python venv in .venv/, Go and npm modules for the peers).
#
#   make            build everything (release with debug info) into build/
#   make check      the release build, its C unit tests and fuzz corpora, and the
#                   integration tests in parallel (docs/testing.md)
#   make test       every test: make check's suites, the C suite and integration
#                   tests under ASan+UBSan, the threaded code under TSan, and
#                   make test-cross (tests/run-suites)
#   make test-cross gcc and clang, and i386, AArch64 (qemu) and s390x (qemu):
#                   build, unit tests, fuzz corpora, logs across architectures
#                   (part of make test; about 3 minutes; docs/portability.md)
#   make bench      the quick benchmark suite and its HTML report
#   make fuzz       run every libFuzzer target for FUZZ_SECONDS each (clang)
#   make asan | tsan | debug   sanitized or debug builds in build/<name>/
#   make install PREFIX=P   the tools in P/bin, the Eve runtime in P/lib/switchyard

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
FUZZ_SECONDS ?= 30
export PATH := $(PATH):/usr/local/go/bin

# Debian packages the build, the tests and the peers need.
APT_PACKAGES := build-essential cmake ninja-build pkg-config python3 python3-venv \
	clang-14 libclang-rt-14-dev libcrypt-dev libjansson-dev libncurses-dev libssl-dev liburing-dev zlib1g-dev \
	erlang-nox erlang-dev elixir wrk ii irssi weechat-curses tmux curl procps strace \
	iproute2 openssh-server libtbb-dev libomp-14-dev openjdk-17-jdk-headless
# Optional: headless Chromium, for the harness test that opens the report and screenshots its
# first screen (tests/harness/test_report_first_screen.py skips that step without it).
# Installed as root when missing; never a reason to fail.
APT_OPTIONAL := chromium
# Node may come from elsewhere (NodeSource bundles npm, and Debian's npm
# package conflicts with it): install Debian's only when the commands are missing.
APT_IF_NO_COMMAND := node:nodejs npm:npm

# The pytest suites run through tests/pytest-suite (with $(VENV)/bin/pytest): in
# parallel on YARD_TEST_JOBS workers (default twice the cores), then the tests
# marked timing alone.
SUITE := tests/pytest-suite
NPROC := $(shell nproc)

.PHONY: all build install setup deps venv peers prepare check test test-unit test-integration test-asan test-tsan \
	test-cross cross \
	bench fuzz asan tsan debug clean

all: build

build: deps
	@cmake --preset release >/dev/null
	@cmake --build build

# The tools in $(PREFIX)/bin, yard-eve's runtime in $(PREFIX)/lib/switchyard
# (docs/eve.md, "Installing"); the same as cmake --install build --prefix P.
PREFIX ?= /usr/local
install: build
	@cmake --install build --prefix "$(PREFIX)"

debug asan tsan: deps
	@cmake --preset $@ >/dev/null
	@cmake --build build/$@

# apt only when something is missing; as a non-root user say what to install.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	for cp in $(APT_IF_NO_COMMAND); do \
		command -v $${cp%%:*} >/dev/null || missing="$$missing $${cp##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else \
			echo "missing Debian packages:$$missing (run 'sudo make deps')"; exit 1; \
		fi; \
	fi; \
	for p in $(APT_OPTIONAL); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" && continue; \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing (optional): $$p"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$p >/dev/null) \
				|| echo "optional package $$p not installed; its test step is skipped"; \
		fi; \
	done

venv: $(VENV)/.stamp
$(VENV)/.stamp: tests/requirements.txt $(wildcard python/pyproject.toml) | deps
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --upgrade pip
	@$(VENV)/bin/pip install -q -r tests/requirements.txt
	@if [ -f python/pyproject.toml ]; then $(VENV)/bin/pip install -q -e 'python[test]'; fi
	@touch $@

peers: deps
	@if [ -f peers/Makefile ]; then $(MAKE) --no-print-directory -C peers; fi

# The release build, the peers and the venv are made side by side (pip waits on the
# network while the compilers run), then the suites. (make test adds the sanitizer builds.)
prepare:
	@$(MAKE) --no-print-directory -j3 build peers venv

check: prepare
	@tests/run-suites release
	@echo "make check: the release build's suites passed"

# make test: the release build, the peers and the venv as make check makes them, then
# tests/run-suites, which builds the sanitizer and cross builds at idle priority while the
# release suite runs, then runs every suite (docs/testing.md).
test: prepare
	@tests/run-suites release asan tsan cross
	@echo "make test: all suites passed"

test-unit: build
	@ctest --test-dir build -j $(NPROC) --output-on-failure

test-integration: build peers venv
	@$(SUITE) tests

# The C suite and the integration tests against the ASan+UBSan binaries, and the threaded
# code under TSan: what each runs is in tests/run-suites.
test-asan: asan venv
	@tests/run-suites asan

test-tsan: tsan venv
	@tests/run-suites tsan

# Compilers and architectures (issue 21): build/cross-<name>/, one summary
# line each, then "N passed, N failed". Installs its cross compilers and
# qemu-user as root; see tests/cross/run and docs/portability.md.
test-cross: build venv
	@CROSS_X86_64_FROM=build tests/cross/run
cross: test-cross

# yard bench prints one line per experiment started and finished when not on a terminal,
# and ends with the verdict rows and the report's path.
bench: build peers venv
	@$(VENV)/bin/yard bench quick && echo "report: $(CURDIR)/results/latest/report.html"

fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build build/libfuzzer --target fuzzers
	@for f in build/libfuzzer/fuzz/fuzz_*; do \
		t=$${f##*/fuzz_}; mkdir -p build/libfuzzer/corpus/$$t; \
		dict=""; [ -f fuzz/$$t.dict ] && dict="-dict=fuzz/$$t.dict"; \
		echo "fuzzing $$t for $(FUZZ_SECONDS)s"; \
		$$f -max_total_time=$(FUZZ_SECONDS) $$dict build/libfuzzer/corpus/$$t fuzz/corpus/$$t || exit 1; \
	done

clean:
	rm -rf build
