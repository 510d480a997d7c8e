#!/bin/sh
# Where the time of one `aw-send` goes on GlusterFS: a volume with one brick is created and
# mounted (FUSE), and REPS sends are timed into an instance on it and into one on the local
# disk (median wall time of a whole `aw-send` process, in µs); then one send on each is
# traced with `strace -f -T`, and the time spent in each system call is summed (calls, ms),
# the calls that cross the FUSE mount being what a network file system makes slow. Needs
# root, GlusterFS (sh scripts/test-deps.sh) and strace; the volume is removed on exit.
# Usage: sh bench/netfs-send.sh [--reps N] [--bin DIR]   (prints Markdown)
set -eu
cd "$(dirname "$0")/.."
REPS=21
BIN=target/release
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=${2:?--reps needs a number} && shift 2 ;;
	--bin) BIN=${2:?--bin needs a directory} && shift 2 ;;
	-h | --help) echo "usage: sh bench/netfs-send.sh [--reps N] [--bin DIR]" && exit 0 ;;
	*) echo "bench/netfs-send.sh: unknown argument '$1' (hint: --reps, --bin)" >&2 && exit 64 ;;
	esac
done
case $REPS in '' | *[!0-9]* | 0) echo "bench/netfs-send.sh: --reps '$REPS' is not a positive number" >&2 && exit 64 ;; esac
[ -x "$BIN/aw-send" ] || { echo "bench/netfs-send.sh: no aw-send in $BIN (hint: make build; --bin DIR)" >&2 && exit 66; }
[ "$(id -u)" = 0 ] || { echo "bench/netfs-send.sh: needs root (it creates and mounts a GlusterFS volume)" >&2 && exit 77; }
for p in gluster strace mount.glusterfs; do
	command -v "$p" >/dev/null || { echo "bench/netfs-send.sh: $p is missing (hint: sh scripts/test-deps.sh)" >&2 && exit 69; }
done
dir=$(mktemp -d)
vol=awbench$$
host=$(hostname)
cleanup() {
	umount "$dir/mnt" 2>/dev/null || true
	gluster --mode=script volume stop "$vol" force >/dev/null 2>&1 || true
	gluster --mode=script volume delete "$vol" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
mkdir "$dir/brick" "$dir/mnt" "$dir/local"
gluster --mode=script volume create "$vol" "$host:$dir/brick" force >/dev/null
gluster --mode=script volume start "$vol" >/dev/null
mount -t glusterfs "$host:/$vol" "$dir/mnt"

echo "# aw-send on GlusterFS and on the local disk"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); $REPS sends each"
echo
for where in local mnt; do
	root=$dir/$where/root
	"$BIN/aw-ctl" --root "$root" -i w new bob >/dev/null 2>&1
	"$BIN/aw-send" --root "$root" -i w -f user "first" >/dev/null
	i=0
	: >"$dir/times"
	while [ "$i" -lt "$REPS" ]; do
		i=$((i + 1))
		s=$(date +%s%N)
		"$BIN/aw-send" --root "$root" -i w -f user "message $i @bob" >/dev/null
		e=$(date +%s%N)
		echo $(((e - s) / 1000)) >>"$dir/times"
	done
	med=$(sort -n "$dir/times" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	strace -f -T -o "$dir/trace" "$BIN/aw-send" --root "$root" -i w -f user "traced @bob" >/dev/null
	name=$where
	[ "$where" = mnt ] && name=GlusterFS
	echo "## $name: median $med µs per send"
	echo
	echo "| system call | calls | ms |"
	echo "|---|---:|---:|"
	awk '/<[0-9.]+>$/ { n = split($0, p, "<"); t = p[n]; sub(/>.*/, "", t); c = $2; sub(/\(.*/, "", c)
			calls[c]++; ms[c] += t * 1000; all += t * 1000; k++ }
		END { for (c in ms) printf "%s %d %.2f\n", c, calls[c], ms[c]; printf "~all %d %.2f\n", k, all }' "$dir/trace" |
		sort -k3 -nr | head -11 | awk '{ sub(/^~/, "", $1); printf "| %s | %d | %.2f |\n", $1, $2, $3 }'
	echo
done
