"""Output encodings: compact JSON (JavaScript style) and YAML with hashes always quoted; and
JSON parsing for the read path.

``dumps`` and ``loads`` use the C accelerator ``json`` itself uses (``_json``) directly: the
``json`` package compiles its regular expressions when it is imported, which is ~2% of a
``uwf thread show`` (docs/performance.md, "Start-up"), and uwf's own JSON is always compact.
Anything the fast path does not take (whitespace around a document, an invalid one) goes to
``json``, which decides and words the error.

Why a private module stays (issue 38 asked for ``json``'s public classes): the same code on
``json.JSONEncoder``/``JSONDecoder`` — the same C functions underneath — cost 1.1% and 1.8% more
CPU per ``uwf thread show`` (two paired runs of 31 and 41 whole processes, medians), all of it
the ``json`` import, on the command whose start-up is already at its target's edge. What
``_json`` is asked for (``make_scanner`` over a decoder's attributes, ``make_encoder`` with
``json.encoder``'s argument order) is what ``json`` itself calls; ``tests/test_jsonfmt.py``
compares every answer with ``json``'s, so a Python that changed them fails there first.
"""

from __future__ import annotations

import _json
import math
from typing import Any

from uwf.util.errors import InvalidInput

_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """What ``_json.make_scanner`` reads of a decoder: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # it reads these attributes
# markers None: no check for circular references (uwf encodes data, never object graphs)
_encode = _json.make_encoder(
    None, _no_default, _json.encode_basestring, None, ":", ",", False, False, False
)


def loads(text: str) -> Any:
    """``json.loads(text)``, without importing ``json`` when ``text`` is one compact value."""
    try:
        value, end = _scan(text, 0)
    except (StopIteration, ValueError, SystemError):
        # not one whole value: json.loads says why. (Cut inside a string, the bare C scanner
        # fails with a SystemError instead of its JSONDecodeError.)
        end = -1
    if end == len(text):
        return value
    import json

    return json.loads(text)


def canonical(value: Any) -> Any:
    """The canonical form of a JSON value: integral floats within ±2^53 become integers.

    Hashing treats ``1.0`` and ``1`` alike (docs/format.md, "Nodes"), so the store keeps the
    canonical form and outputs print numbers the way JavaScript does. NaN and ±Infinity are refused.
    """
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InvalidInput("NaN and Infinity are not valid JSON values")
        if value.is_integer() and abs(value) <= 2**53:
            return int(value)
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"object keys must be strings, got {type(key).__name__}")
            _check_text(key)
            out[key] = canonical(item)
        return out
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, str):
        _check_text(value)
        return value
    if value is None or isinstance(value, (bool, int)):
        return value
    raise InvalidInput(f"not a JSON value: {type(value).__name__}")


def is_utf8(text: str) -> bool:
    """False for text holding lone surrogates (undecodable input bytes): not storable as UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(text: str) -> None:
    if not is_utf8(text):
        raise InvalidInput("text is not valid UTF-8")


def dumps(value: Any) -> str:
    """Compact JSON exactly as JavaScript's JSON.stringify would print it (non-ASCII kept):
    ``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``."""
    return "".join(_encode(value, 0))


def dump_yaml(value: Any) -> str:
    """Block-style YAML; strings that look like numbers, booleans or hashes are quoted."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        style = None
        if "\n" in data:
            style = "|"
        elif data and (
            data[0].isdigit() or (data.upper() == data and any(c.isdigit() for c in data))
        ):
            style = '"'
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _Dumper.add_representer(str, _str)
    text = yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n")) + "\n"
