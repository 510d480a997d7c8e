# aw - build, test, benchmark and install.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHDIR ?= $(PREFIX)/share/zsh/site-functions
FISHDIR ?= $(PREFIX)/share/fish/vendor_completions.d
CARGO ?= cargo

BINS = aw-send aw-peek aw-ctl aw-mcp aw-run
# Installed binaries are linked statically: a tool that costs about a process spawn should
# not spend half of it in the dynamic loader (see BENCHMARKS.md).
HOST := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
OUT = target/$(HOST)/release
# One profile, target and set of flags for build, demo and test, so that `make test` after
# `make demo` (or `make build`) reuses the dependencies built. What cargo compiles again:
# the aw crate itself (cargo builds a package's own targets for its tests apart) and the
# few dependencies whose features the tests' own dependencies widen (tokio, rmcp).
STATIC = RUSTFLAGS="$$RUSTFLAGS -C target-feature=+crt-static"
PROFILE = --release --target $(HOST)
MAN1 = $(wildcard man/*.1)
MAN5 = $(wildcard man/*.5)
MAN7 = $(wildcard man/*.7)

# Seconds each fuzz target runs: `make fuzz` (FUZZ_TIME) and the smoke run of `make test`.
FUZZ_TIME ?= 60
FUZZ_SMOKE_TIME ?= 10

.PHONY: all build test fuzz fuzz-smoke bench bench-scale check man completions demo interop install uninstall clean

all: build

build:
	$(STATIC) $(CARGO) build $(PROFILE) --bins

# The whole test suite (what CI runs): what the tests need is installed first (or the run
# stops naming it), then the tests, then every fuzz target for a few seconds so that the
# harness cannot rot (needs the nightly toolchain; see the README's FUZZING). The last line
# is the total, `N passed, N failed`; any failure fails the target (scripts/test-total.sh),
# after every test binary has run (--no-fail-fast), so that one failure hides no other.
test:
	sh scripts/test-deps.sh
	$(STATIC) CARGO="$(CARGO)" FUZZ_SMOKE_TIME=$(FUZZ_SMOKE_TIME) sh scripts/test-total.sh --no-fail-fast $(PROFILE)

# Every fuzz target for FUZZ_TIME seconds, one after another (fuzz/run.sh).
fuzz:
	sh fuzz/run.sh $(FUZZ_TIME)

fuzz-smoke:
	sh fuzz/run.sh $(FUZZ_SMOKE_TIME)

# Benchmarks; figures go to BENCHMARKS.md by hand after a run.
bench: build
	AW_BENCH_BIN_DIR="$${AW_BENCH_BIN_DIR:-$(CURDIR)/$(OUT)}" sh bench/run.sh

# The long growth curves (about 45 minutes with the build of one thread per agent): agents
# per aw-run --keep (N = 10 ... 10,000), a chain of K = 10 ... 1,000 agents, reads at 10k ...
# 10M entries. BENCH_BEFORE=DIR measures the aw-* binaries in DIR too (see BENCHMARKS.md).
bench-scale: build
	bin="$${AW_BENCH_BIN_DIR:-$(CURDIR)/$(OUT)}"; \
	set -- --after "$$bin" $${BENCH_BEFORE:+--before "$$BENCH_BEFORE"}; \
	bash bench/agents.sh "$$@" --cap 600 && bash bench/chain.sh "$$@" --cap 600 && \
	bash bench/mentions.sh "$$@" --sizes "10000 100000 1000000 10000000" --reps 3

# Formatting, lints, unused dependencies and man page lint (mandoc, when installed).
check:
	$(CARGO) fmt --all -- --check
	sh scripts/unused-deps.sh
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(MAKE) man

man:
	@if command -v mandoc >/dev/null 2>&1; then \
		mandoc -Tlint -W warning $(MAN1) $(MAN5) $(MAN7); \
	else echo "mandoc not installed: man pages not linted"; fi

# The shell completions, rendered from each tool's table of options (aw-X --generate);
# tests/docs.rs fails when the files in completions/ differ from what the tools print.
completions:
	$(CARGO) build --bins
	for t in $(BINS); do \
		target/debug/$$t --generate complete-bash >completions/$$t.bash && \
		target/debug/$$t --generate complete-zsh >completions/_$$t && \
		target/debug/$$t --generate complete-fish >completions/$$t.fish || exit 1; \
	done

# The main job without an API key: two scripted agents talk until their work is done, on a
# fresh instance each time (hello-DATE-TIME), its channel shown once as it is written.
demo: build
	PATH="$(CURDIR)/$(OUT):$$PATH" sh scripts/demo.sh

# The README's Claude Code and Codex recipes, run with the real CLIs (installed with npm into
# a scratch prefix) against a mock model, then one workflow with an agent of each CLI, the
# same in delegate mode, and an agent of each that keeps its session across runs: needs
# npm, node, python3 and git, no API key. Not part of `make test`: it downloads the CLIs.
interop: build
	AW_BIN_DIR="$${AW_BIN_DIR:-$(CURDIR)/$(OUT)}" sh tests/interop/claude-code.sh
	AW_BIN_DIR="$${AW_BIN_DIR:-$(CURDIR)/$(OUT)}" sh tests/interop/codex.sh
	AW_BIN_DIR="$${AW_BIN_DIR:-$(CURDIR)/$(OUT)}" sh tests/interop/together.sh
	AW_BIN_DIR="$${AW_BIN_DIR:-$(CURDIR)/$(OUT)}" sh tests/interop/together.sh --delegate
	AW_BIN_DIR="$${AW_BIN_DIR:-$(CURDIR)/$(OUT)}" sh tests/interop/session.sh

install: build
	mkdir -p $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(BASHDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR)
	for b in $(BINS); do install -m 0755 $(OUT)/$$b $(DESTDIR)$(BINDIR)/$$b; done
	for m in $(MAN1); do install -m 0644 $$m $(DESTDIR)$(MANDIR)/man1/; done
	for m in $(MAN5); do install -m 0644 $$m $(DESTDIR)$(MANDIR)/man5/; done
	for m in $(MAN7); do install -m 0644 $$m $(DESTDIR)$(MANDIR)/man7/; done
	for b in $(BINS); do \
		install -m 0644 completions/$$b.bash $(DESTDIR)$(BASHDIR)/$$b; \
		install -m 0644 completions/_$$b $(DESTDIR)$(ZSHDIR)/_$$b; \
		install -m 0644 completions/$$b.fish $(DESTDIR)$(FISHDIR)/$$b.fish; \
	done

uninstall:
	for b in $(BINS); do \
		rm -f $(DESTDIR)$(BINDIR)/$$b $(DESTDIR)$(BASHDIR)/$$b \
			$(DESTDIR)$(ZSHDIR)/_$$b $(DESTDIR)$(FISHDIR)/$$b.fish; \
	done
	for m in $(MAN1); do rm -f $(DESTDIR)$(MANDIR)/man1/$$(basename $$m); done
	for m in $(MAN5); do rm -f $(DESTDIR)$(MANDIR)/man5/$$(basename $$m); done
	for m in $(MAN7); do rm -f $(DESTDIR)$(MANDIR)/man7/$$(basename $$m); done

clean:
	$(CARGO) clean
