#!/bin/sh
# `make demo`: examples/hello.yaml, two scripted agents that need no API key, run on a fresh
# instance each time (hello-DATE-TIME, never an old channel continued). aw-run shows the
# channel once, as it is written; the last line says how to show it again.
#
#   sh scripts/demo.sh        (the aw binaries in PATH)
set -eu
cd "$(dirname "$0")/.."
inst=hello-$(date +%Y%m%d-%H%M%S)
# Two demos within one second would share it.
[ ! -e "${AW_ROOT:-.workflow}/$inst" ] || inst=$inst-$$
aw-run -i "$inst" --create examples/hello.yaml
echo "demo: a new instance '$inst': aw-peek -i $inst -n 0 shows its channel again" >&2
