#!/usr/bin/env bash
# The whole test suite from a fresh machine: set up .venv with the dev, hermes, ui, otel and
# postgres extras, then run the linters, the type checker, the layer contracts and pytest on
# two workers per core (pytest-xdist, work-stealing: a test waiting on a process, a server or a
# deadline leaves its core to another; UWF_TEST_WORKERS overrides how many). Any failure
# fails the run. Arguments go to pytest: `-m stress` runs the long tier instead of the default
# one, `-m "stress or not stress"` both (README.md, "Tests").
# UWF_FRESH_VENV=1 (set by .ci/run) rebuilds the venv from scratch.
# The browser tests need Debian's chromium (and the graph tests Graphviz's dot): installed with
# apt-get where missing (CI runs as root on a fresh Debian machine); the Mermaid build they render
# with comes from the npm registry at a pinned version and sha256 (scripts/fetch-mermaid.sh).
# The PostgreSQL tests start a real server from Debian's postgresql package (installed where
# missing); as root, it runs as the unprivileged "postgres" user (created here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${UWF_FRESH_VENV:-0}" = 1 ]; then rm -rf .venv; fi
if [ ! -x .venv/bin/pytest ] || [ pyproject.toml -nt .venv/.installed ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev,hermes,ui,otel,postgres]'
  touch .venv/.installed
fi
if [ ! -x /usr/bin/chromium ] || ! command -v dot >/dev/null; then
  echo "== apt-get install chromium graphviz"
  if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo apt-get); fi
  "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq chromium graphviz >/dev/null
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== apt-get install postgresql"
  if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo apt-get); fi
  "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq postgresql >/dev/null
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
fi
bash scripts/fetch-mermaid.sh
# Compile uwf's modules once, as pip does for what it installs: otherwise every worker and every
# `uwf` process they start compiles the editable source again until one has written its cache.
.venv/bin/python -m compileall -q -j 0 src >/dev/null
export PATH="$PWD/.venv/bin:$PATH"

stage() { echo "== $1 (${SECONDS}s)"; }
stage "ruff check";      ruff check src tests benchmarks
stage "ruff format";     ruff format --check src tests benchmarks
stage "mypy";            mypy
stage "import-linter";   lint-imports
workers="${UWF_TEST_WORKERS:-$(( $(nproc) * 2 ))}"
stage "pytest ($workers workers)"; pytest -n "$workers" --dist worksteal "$@"
stage "done"
