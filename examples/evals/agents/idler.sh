#!/bin/sh
# An agent (run by uwf-cmd in the thread's working directory) that says it is done and
# changes nothing.
cat >/dev/null  # the prompt, on stdin
printf -- '---\nstatus: done\nsummary: looked at it\n---\nIt looks fine to me.\n'
