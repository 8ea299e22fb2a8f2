#!/usr/bin/env bash
# uwf vs LangGraph vs Apache Burr on the same planner -> developer -> reviewer loop, one run.
#
#   bash benchmarks/run.sh            # the full run: every row and table of docs/performance.md
#   bash benchmarks/run.sh --docs     # … and regenerate docs/performance.md from it
#   bash benchmarks/run.sh --quick    # small sizes, for development
#   bash benchmarks/run.sh --help     # every option (--repeat, --no-peers, --no-postgres, …)
#   python3 benchmarks/report.py      # regenerate docs/performance.md from the last run
#
# The PostgreSQL and fleet rows start a local server from the PostgreSQL binaries (Debian's
# postgresql package; see tests/pgserver.py); --no-postgres leaves them out.
#
# Sets up .venv (uwf, editable) if missing and benchmarks/.peer-venv with the peers, every
# package of it pinned by benchmarks/peers/constraints.txt, then runs benchmarks/compare.py.
# Needs python3 (3.11+) and access to PyPI. Writes benchmarks/last-run.json and last-run.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS=(
  "langgraph==1.2.22"
  "langgraph-checkpoint-sqlite==3.1.2"
  "apache-burr==0.43.0"
  # the PostgreSQL rows: LangGraph's Postgres saver and Burr's Postgres persister
  "langgraph-checkpoint-postgres==3.2.0"
  "psycopg[binary]==3.3.9"
  "psycopg2-binary==2.9.13"
)
CONSTRAINTS=benchmarks/peers/constraints.txt

if [ ! -x .venv/bin/uwf ] || ! .venv/bin/python -c "import psycopg" 2>/dev/null; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[postgres]'
fi

for arg in "$@"; do  # uwf alone: no peer venv to set up
  if [ "$arg" = --no-peers ]; then exec .venv/bin/python benchmarks/compare.py "$@"; fi
done

peer_venv=benchmarks/.peer-venv
stamp="$peer_venv/.installed"
wanted="${PEERS[*]} $(sha256sum "$CONSTRAINTS" | cut -c1-16)"
if [ ! -x "$peer_venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "setting up $peer_venv: ${PEERS[*]} (constraints: $CONSTRAINTS)" >&2
  rm -rf "$peer_venv"
  python3 -m venv "$peer_venv"
  "$peer_venv/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" "${PEERS[@]}"
  echo "$wanted" > "$stamp"
fi

exec .venv/bin/python benchmarks/compare.py --peer-python "$PWD/$peer_venv/bin/python" "$@"
