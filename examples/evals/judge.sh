#!/bin/sh
# The command judge of both tasks: runs the fixture's tests in the working directory as the
# run left it ($1 is the thread id) and prints the verdict as its last line.
if python3 -m unittest -q >/dev/null 2>&1; then
  echo '{"score": 1, "data": {"tests": "pass"}}'
else
  echo '{"score": 0, "data": {"tests": "fail"}}'
fi
