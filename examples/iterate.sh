#!/bin/sh
# The agent of examples/iterate.yaml: aw-run gives the prompt on stdin, with the
# iteration number and the earlier iterations' summaries and commits. It adds a
# line to steps.txt in the current directory and prints its summary; AW-DONE
# alone on a line says the task is done.
set -eu
n=$(sed -n 's/^Iteration: \([0-9][0-9]*\).*/\1/p' | head -n 1)
echo "step $n" >> steps.txt
echo "Add step $n"
if [ "$(wc -l < steps.txt)" -ge 3 ]; then
  echo AW-DONE
fi
