#!/bin/sh
# The lead of examples/board.yaml: it reads its prompt on stdin and splits the work
# into cards, each naming the one file it is about; a card waits for the cards
# given with --after and is ready once they are all done.
set -eu
cat > /dev/null
card() {
  title=$1 file=$2
  shift 2
  echo "file: $file" | aw-ctl board add "$title" --body - "$@"
}
parser=$(card "write the parser" board-demo/src/parse.txt)
checker=$(card "write the checker" board-demo/src/check.txt)
card "test the parser" board-demo/tests/parse.txt --after "$parser" > /dev/null
card "document both" board-demo/README.txt --after "$parser,$checker" > /dev/null
echo "Split the work into 4 cards; the workers take them as they become ready."
