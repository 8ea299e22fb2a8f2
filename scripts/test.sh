#!/usr/bin/env bash
# The whole test suite from a fresh machine: set up .venv with the dev and hermes extras, then run the
# linters, the type checker, the layer contracts and pytest. Any failure fails the run.
# UWF_FRESH_VENV=1 (set by .ci/run) rebuilds the venv from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${UWF_FRESH_VENV:-0}" = 1 ]; then rm -rf .venv; fi
if [ ! -x .venv/bin/pytest ] || [ pyproject.toml -nt .venv/.installed ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev,hermes]'
  touch .venv/.installed
fi
export PATH="$PWD/.venv/bin:$PATH"

echo "== ruff check";        ruff check src tests benchmarks
echo "== ruff format";       ruff format --check src tests benchmarks
echo "== mypy";              mypy
echo "== import-linter";     lint-imports
echo "== pytest";            pytest "$@"
