#!/bin/sh
# Make sure everything the test suite needs is on this machine, or fail loudly.
#
#   sh scripts/test-deps.sh
#
# The suite needs: mandoc (man page lint), git (the merge queue and the file tools work on
# real repositories), tmux (the live view is driven in a terminal),
# script (what reaches a terminal is read from one), zsh and fish (the completions are
# read, and run, by the shells they are for),
# GlusterFS with FUSE (the several-hosts tests mount a real volume twice), strace (the
# system calls of a run are counted), jq (the growth-curve benchmarks read JSON Lines with
# it, and their tests run them), chromium (an HTML report is opened in a real headless
# browser: its rendered page is read, and its screenshot looked at), the Python package
# opentelemetry-proto (the trace files are read with the official OTLP definitions), and the nightly
# Rust toolchain (the fuzz smoke run). Missing Debian packages are installed when this runs as
# root on a system with apt-get (one `apt-get update`, then `apt-get install -y`); the nightly
# toolchain is installed with rustup. Anything still missing stops here with exit 69, naming
# it: the suite never skips a test silently because a program is absent.
set -eu

missing=""
need() { # need PROGRAM PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need mandoc mandoc
need git git
need tmux tmux
need glusterd glusterfs-server
need gluster glusterfs-server
need mount.glusterfs glusterfs-client
need unshare util-linux
need script bsdutils
need strace strace
need jq jq
need zsh zsh
need fish fish
need chromium chromium
need python3 python3

if [ -n "$missing" ]; then
	# shellcheck disable=SC2086
	missing=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "test-deps: INSTALLING $missing" >&2
		apt-get update -q >/dev/null
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null
	else
		echo "test-deps: missing packages: $missing" >&2
		echo "test-deps: install them (as root: apt-get install -y $missing) and run again" >&2
		exit 69
	fi
fi

# The trace files are parsed with the official OTLP definitions, pinned.
OTEL_PROTO=opentelemetry-proto==1.45.2
if ! python3 -c 'import opentelemetry.proto.trace.v1.trace_pb2' >/dev/null 2>&1; then
	echo "test-deps: INSTALLING $OTEL_PROTO (Python) to read the trace files" >&2
	python3 -m pip install -q "$OTEL_PROTO" ||
		python3 -m pip install -q --break-system-packages "$OTEL_PROTO" || {
		echo "test-deps: cannot install $OTEL_PROTO with pip (is python3-pip there?)" >&2
		exit 69
	}
	python3 -c 'import opentelemetry.proto.trace.v1.trace_pb2' || {
		echo "test-deps: $OTEL_PROTO installed but not importable by python3" >&2
		exit 69
	}
fi

if [ ! -c /dev/fuse ]; then
	echo "test-deps: /dev/fuse is missing: the several-hosts tests mount GlusterFS through FUSE" >&2
	echo "test-deps: load the module (modprobe fuse) or give the container the device" >&2
	exit 69
fi

if ! command -v rustup >/dev/null 2>&1; then
	echo "test-deps: rustup is missing: the fuzz smoke run needs the nightly toolchain" >&2
	exit 69
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
	echo "test-deps: INSTALLING the nightly toolchain for the fuzz targets" >&2
	rustup toolchain install nightly --profile minimal
fi
