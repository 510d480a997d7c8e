#!/bin/sh
# A worker of examples/board.yaml (board: next): aw-run claims a card for it before
# each run, shows it in the prompt and gives its id in AW_CARD. The worker leases the
# file the card names, writes it, and finishes the card, through the tools a model
# calls (here with aw-mcp on stdio, as AW_AGENT); board_done releases its leases.
set -eu
cat > /dev/null
tool() {
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"board-worker","version":"0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}" |
    aw-mcp --root "$AW_ROOT" --agent "$AW_AGENT@$AW_INSTANCE" | grep '"id":2'
}
file=$(aw-ctl board show "$AW_CARD" | sed -n 's/^file: //p')
# A lease another agent holds is a tool error naming it: this run fails, the card is
# given back, and it is taken again later.
if tool lease_take "{\"paths\":[\"$file\"],\"reason\":\"card $AW_CARD\"}" | grep -q '"isError":true'; then
  echo "$file is leased by another agent" >&2
  exit 1
fi
mkdir -p "$(dirname "$file")"
echo "written by $AW_AGENT for card $AW_CARD" > "$file"
tool board_done "{\"id\":$AW_CARD,\"note\":\"wrote $file\"}" > /dev/null
echo "Card $AW_CARD done: wrote $file."
