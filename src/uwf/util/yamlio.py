"""Safe YAML loading with limits: size, nesting depth and total nodes (alias bombs), and
finite numbers.

YAML is only ever loaded with the safe loader (the C one when PyYAML has it). A document
that is too large, too deep or expands to too many nodes through aliases is refused with
one clear line instead of eating memory or the stack. So is a number that is not finite
(``.nan``, ``.inf``, or a literal too large for a float such as ``1e400``): uwf's data is
JSON, which has no such numbers, and every setting uwf reads from YAML (config.yaml, a
workflow file, a task.yaml) comes through here, so this is the one place they are refused.
"""

from __future__ import annotations

import math
from typing import Any

from uwf.util.errors import InvalidInput
from uwf.util.root import MAX_YAML_BYTES

MAX_BYTES = MAX_YAML_BYTES
MAX_DEPTH = 64
MAX_NODES = 100_000


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_loader() -> Any:
    """The safe loader class every YAML document is read with (the C one when there is one)."""
    return _loader()


def load(
    text: str | bytes,
    *,
    source: str = "YAML",
    max_bytes: int = MAX_BYTES,
    path: object = None,
    loader: Any = None,
) -> Any:
    """Parse one YAML document; raise InvalidInput with ``invalid YAML…`` on any problem.

    ``path``: the file the text came from, named where the parser's message points at a line
    (``in "/root/config.yaml", line 3, column 1``) instead of PyYAML's ``"<byte string>"``.
    ``loader``: called with the text instead of the safe loader, to build one that knows a
    tag more (``uwf.util.includes``: ``!include``); it must be a subclass of ``safe_loader()``.
    """
    size = len(text.encode() if isinstance(text, str) else text)
    if size > max_bytes:
        raise InvalidInput(f"{source} is too large: {size} bytes (limit {max_bytes})")
    if loader is None:
        plain = _plain(text)  # the plain form, read alike without PyYAML
        if plain is not None:
            check_limits(plain)
            return plain
    import yaml

    try:
        _check_depth(text)
        value = yaml.load(text, Loader=loader or _loader())
    except yaml.YAMLError as exc:
        if _too_deep(exc):
            raise InvalidInput(f"invalid YAML: nested deeper than {MAX_DEPTH} levels") from None
        message = _one_line(exc)
        if path is not None:
            from uwf.util import jsonfmt

            for stream in ('"<byte string>"', '"<unicode string>"'):
                message = message.replace(stream, jsonfmt.dumps(str(path)))
        raise InvalidInput(f"invalid YAML: {message}") from None
    except RecursionError:
        raise InvalidInput(f"invalid YAML: nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. `a: 2024-13-45`, `!!int 0x`
        raise InvalidInput(f"invalid YAML: {_one_line(exc)}") from None
    check_limits(value)
    return value


def _plain(text: str | bytes) -> dict[str, Any] | None:
    """``text`` read by ``plainyaml``, None when it is not of the plain form. Bytes are read
    as UTF-8, as PyYAML reads them (bytes of another encoding start with a byte-order mark,
    which UTF-8 refuses, or which the plain form does not take)."""
    from uwf.util import plainyaml

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return plainyaml.read(text)


def _check_depth(text: str | bytes) -> None:
    """Refuse deep nesting from the parser's events, before anything is constructed: the C
    loader crashes (SIGSEGV) on documents nested some 300,000 levels deep."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=_loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidInput(f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def check_limits(value: Any) -> None:
    """Refuse values nested deeper than MAX_DEPTH, with more than MAX_NODES nodes, or
    holding a number that is not finite (NaN, an infinity)."""
    budget = MAX_NODES
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise InvalidInput(f"invalid YAML: more than {MAX_NODES} nodes (alias expansion?)")
        if depth > MAX_DEPTH:
            raise InvalidInput(f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            stack.extend((k, depth + 1) for k in item if isinstance(k, (tuple, dict, list, float)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, float) and not math.isfinite(item):
            where, number = _first_non_finite(value) or ("", item)
            raise InvalidInput(
                f"invalid YAML: {where or '(the document)'}: {_yaml_text(number)} is not a finite "
                "number (NaN and infinities are refused)"
            )


def _yaml_text(number: float) -> str:
    return ".nan" if math.isnan(number) else (".inf" if number > 0 else "-.inf")


def _first_non_finite(value: Any, path: str = "", depth: int = 0) -> tuple[str, float] | None:
    """Where the first number that is not finite is, in document order, and the number (an
    error path only; a key is named by the mapping that holds it)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if depth > MAX_DEPTH:
        return None
    children: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, float) and not math.isfinite(key):
                return (f"{path} (a key)" if path else "a key", key)
            children.append((f"{path}.{key}" if path else str(key), item))
    elif isinstance(value, list):
        children = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    for where, item in children:
        found = _first_non_finite(item, where, depth + 1)
        if found is not None:
            return found
    return None


def _too_deep(exc: Exception) -> bool:
    """libyaml 0.2.5 (PyYAML 6.0.4's wheels) stops nesting past 1,000 levels in its scanner,
    which reads ahead of the events ``_check_depth`` counts: its ``exceeded maximum nesting
    depth`` is worded as ours, since anything it refuses is deeper than MAX_DEPTH too."""
    return "exceeded maximum nesting depth" in str(exc)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300]
