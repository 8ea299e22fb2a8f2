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
# postgresql package) with PostgreSQL's durable defaults (fsync, synchronous_commit and
# full_page_writes on; tests/pgserver.py, durable=True); --no-postgres leaves them out.
#
# Sets up .venv (uwf, editable) if missing, and one venv per peer, so that no peer's process
# imports another's packages (Burr's state module loads a serde plugin for every one of
# langchain, pydantic and pandas it finds installed):
#   benchmarks/.venv-langgraph  LangGraph with its SQLite and PostgreSQL savers (psycopg 3)
#   benchmarks/.venv-burr       Burr with what its persisters need (psycopg2) and PyYAML, which
#                               the external-agent node parses its agent's frontmatter with
# every package of either pinned by benchmarks/peers/constraints.txt. Then runs
# benchmarks/compare.py, which records `pip freeze` of all three environments in the run.
# Needs python3 (3.11+) and access to PyPI. Writes benchmarks/last-run.json and last-run.md.
set -euo pipefail
cd "$(dirname "$0")/.."

LANGGRAPH=(
  "langgraph==1.2.22"
  "langgraph-checkpoint-sqlite==3.1.2"
  "langgraph-checkpoint-postgres==3.2.0"
  "psycopg[binary]==3.3.9"
)
BURR=(
  "apache-burr==0.43.0"
  "psycopg2-binary==2.9.13"  # burr.integrations.persisters.b_psycopg2
  "PyYAML==6.0.4"            # the external-agent node's frontmatter parser
)
CONSTRAINTS=benchmarks/peers/constraints.txt

if [ ! -x .venv/bin/uwf ] || ! .venv/bin/python -c "import psycopg2" 2>/dev/null; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[postgres]'
fi

for arg in "$@"; do  # uwf alone: no peer venv to set up
  if [ "$arg" = --no-peers ]; then exec .venv/bin/python benchmarks/compare.py "$@"; fi
done

# peer_venv DIR PACKAGES...: a venv holding exactly PACKAGES and their dependencies, pinned
peer_venv() {
  local dir=$1
  shift
  local stamp="$dir/.installed"
  local wanted
  wanted="$* $(sha256sum "$CONSTRAINTS" | cut -c1-16)"
  if [ ! -x "$dir/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "setting up $dir: $* (constraints: $CONSTRAINTS)" >&2
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" "$@"
    echo "$wanted" > "$stamp"
  fi
}
peer_venv benchmarks/.venv-langgraph "${LANGGRAPH[@]}"
peer_venv benchmarks/.venv-burr "${BURR[@]}"

exec .venv/bin/python benchmarks/compare.py \
  --peer "LangGraph=$PWD/benchmarks/.venv-langgraph/bin/python" \
  --peer "Burr=$PWD/benchmarks/.venv-burr/bin/python" "$@"
