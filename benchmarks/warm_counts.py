"""What a warm step does, counted rather than timed (docs/performance.md, "Warm: where the
design cannot win"): the same loop as ``uwf_warm.py steps``, with counters around the
functions that read, parse, validate and sync.

    <uwf venv>/bin/python benchmarks/warm_counts.py --store ROOT --count C

``ROOT`` is a storage root set up as the benchmark sets one up (``uwf_bench.setup_root``).
Prints one JSON object: per warm step (the mean over ``C`` steps after an uncounted one),
``node_reads`` (nodes read and decoded from the storage), ``config_parses`` (config.yaml
parsed and checked), ``dotenv_parses``, ``yaml_loads`` (by source), ``validations`` (payloads
checked against a schema), ``schema_walks`` (schemas checked for the fast validator's subset),
``put_schema`` (calls) and ``schema_writes`` (a schema node written or refreshed), ``fsyncs``.
Counts only: it works on any uwf since issue 36 (it wraps functions every version has).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
from collections.abc import Callable
from typing import Any

import uwf_warm

from uwf.backend import open_backend
from uwf.cas import fastschema, schema
from uwf.cas.store import Store
from uwf.config import config
from uwf.engine.step import step
from uwf.util import yamlio

counts: collections.Counter[str] = collections.Counter()


def counted(owner: Any, name: str, key: Callable[..., str | None] | str) -> None:
    """Wrap ``owner.name`` so that each call adds one to ``key`` (or to what ``key`` makes
    of the call's arguments; None: not counted)."""
    real = getattr(owner, name)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        found = key if isinstance(key, str) else key(*args, **kwargs)
        if found is not None:
            counts[found] += 1
        return real(*args, **kwargs)

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()

    backend = open_backend(args.store)
    run = uwf_warm.in_process(backend)
    thread, _ = uwf_warm.new_thread(backend)
    meta = schema.meta_hash()
    nodes = type(backend.nodes)
    counted(nodes, "_load", "node_reads")
    counted(config, "parse_config", "config_parses")
    counted(fastschema, "is_valid", "validations")
    counted(fastschema, "supported", "schema_walks")
    counted(Store, "put_schema", "put_schema")
    counted(nodes, "_store", lambda _s, _h, t, *a, **k: "schema_writes" if t == meta else None)
    counted(yamlio, "load", lambda *a, **k: f"yaml_loads:{k.get('source', '?')}")
    counted(os, "fsync", "fsyncs")
    import dotenv

    counted(dotenv, "dotenv_values", "dotenv_parses")
    step(backend, thread, runner=run)  # the first step: what a process reads once
    counts.clear()
    for _ in range(args.count):
        step(backend, thread, runner=run)
    print(json.dumps({k: round(v / args.count, 2) for k, v in sorted(counts.items())}))


if __name__ == "__main__":
    main()
