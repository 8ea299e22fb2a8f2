#!/bin/sh
# An agent (run by uwf-cmd in the thread's working directory) that fixes calc.py.
cat >/dev/null  # the prompt, on stdin
sed -i 's/return a - b/return a + b/; s/return min(a, b)/return max(a, b)/' calc.py
printf -- '---\nstatus: done\nsummary: fixed calc.py\n---\nFixed the operator in calc.py.\n'
