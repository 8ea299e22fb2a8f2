#!/usr/bin/env bash
# The main job, end to end: set up uwf in .venv, register the bundled solve-issue workflow in a
# throwaway storage root, run it to $END with the scripted uwf-mock agent (one rejection
# loop), and print the thread as markdown. Needs only python3.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/uwf ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e .
fi
export PATH="$PWD/.venv/bin:$PATH"
UNCAGED_WORKFLOW_STORAGE_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/uwf-demo.XXXXXX")"
export UNCAGED_WORKFLOW_STORAGE_ROOT
echo "storage root: $UNCAGED_WORKFLOW_STORAGE_ROOT" >&2

# Agents are configured in config.yaml; the demo's only agent is the scripted mock.
cat > "$UNCAGED_WORKFLOW_STORAGE_ROOT/config.yaml" <<YAML
agents:
  mock:
    command: uwf-mock
    args: ["--scenario", "$PWD/examples/solve-issue.mock.yaml"]
defaultAgent: mock
YAML

uwf workflow put examples/solve-issue.yaml
thread=$(uwf thread start solve-issue -p "Validate e-mail addresses on the signup form: today any text is accepted." \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["thread"])')
uwf thread step "$thread" -c 20 >/dev/null
uwf thread show "$thread"
uwf thread read "$thread" --quota 100000
