"""What a role can emit: the fields and the statuses of its output, read from its schema.

One rule, used by the workflow validator (which edges a role needs), the prompts (which
fields an agent is asked for), the frontmatter fast path (which fields it takes from an
answer) and any agent that builds a form or a template from the schema (docs/format.md,
"What a role can emit"):

* **Shapes.** A schema with a ``properties`` mapping is one shape (its own ``anyOf``/
  ``oneOf`` are not looked into). Otherwise its ``anyOf`` members, then — only when
  ``anyOf`` gives no shape — its ``oneOf`` members, are read the same way, recursively, and
  their shapes are listed in order. Anything else (``true``, ``{"type": "string"}``, ``{}``)
  gives no shape: the schema declares no fields.
* **Fields** are the union of the shapes' properties, in order of first appearance; the first
  shape that names a field decides its schema, and a field is required when any shape
  requires it.
* **Statuses.** The moderator routes on ``output.status`` when it is a string, else on the
  unit status ``_``. A shape without ``status`` always routes on ``_``. A ``status`` with
  ``enum``/``const`` (also inside ``anyOf``/``oneOf`` of the property) emits exactly those
  values; a ``null`` among them, or a status that the shape does not require, also lets the
  output route on ``_``. A ``status`` without ``enum``/``const`` can be any string: the
  statuses are not known. No shape at all: not known either.
"""

from __future__ import annotations

import json
from typing import Any

from uwf.util.tuples import NamedTuple

#: Unions nested deeper than this are not read (a schema put with ``cas put`` can be deep).
MAX_DEPTH = 32


class Shape(NamedTuple):
    """One object shape of an output: its ``properties`` and the names it requires."""

    properties: dict[str, Any]
    required: frozenset[str]


def _shape(schema: dict[str, Any]) -> Shape:
    required = schema.get("required")
    names = (
        frozenset(r for r in required if isinstance(r, str))
        if isinstance(required, list)
        else frozenset()
    )
    return Shape(schema["properties"], names)


def shapes(schema: Any, _depth: int = 0) -> list[Shape]:
    """The object shapes whose fields an agent fills (see the module docstring)."""
    if not isinstance(schema, dict) or _depth > MAX_DEPTH:
        return []
    if isinstance(schema.get("properties"), dict):
        return [_shape(schema)]
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            found = [s for member in members for s in shapes(member, _depth + 1)]
            if found:
                return found
    return []


class Field(NamedTuple):
    """One field of a role's output: its name, its schema and whether it is required."""

    name: str
    schema: Any
    required: bool

    @property
    def resolved(self) -> dict[str, Any]:
        """The schema that decides the field's values: an ``enum`` as is, else the one
        non-null member of an ``anyOf``/``oneOf`` (a nullable field), else the schema."""
        prop = self.schema
        if not isinstance(prop, dict):
            return {}
        enum = prop.get("enum")
        if isinstance(enum, list) and enum:
            return prop
        for key in ("anyOf", "oneOf"):
            members = prop.get(key)
            if isinstance(members, list):
                non_null = [
                    m for m in members if not (isinstance(m, dict) and m.get("type") == "null")
                ]
                if len(non_null) == 1:
                    return non_null[0] if isinstance(non_null[0], dict) else {}
                break
        return prop

    @property
    def choices(self) -> list[Any] | None:
        """The values an ``enum`` (or ``const``) allows, None when it is not a closed set."""
        resolved = self.resolved
        enum = resolved.get("enum")
        if isinstance(enum, list) and enum:
            return list(enum)
        if "const" in resolved:
            return [resolved["const"]]
        return None

    @property
    def kind(self) -> Any:
        """The JSON type of the field; a ``[T, "null"]`` list counts as T; None if unknown."""
        kind = self.resolved.get("type")
        if isinstance(kind, list):
            non_null = [k for k in kind if k != "null"]
            return non_null[0] if len(non_null) == 1 else None
        return kind


def fields(schema: Any) -> list[Field]:
    """The fields of a role's output, in schema order (see the module docstring)."""
    out: dict[str, Field] = {}
    for shape in shapes(schema):
        for name, prop in shape.properties.items():
            is_required = name in shape.required
            known = out.get(name)
            if known is None:
                out[name] = Field(name, prop, is_required)
            elif is_required and not known.required:
                out[name] = Field(name, known.schema, True)
    return list(out.values())


def fields_for(schema: Any, key: str, status: str) -> list[str] | None:
    """The fields an output that routes on ``status`` can have: those of the shapes that can
    emit it (a ``oneOf`` branch per status has its own); None when the statuses are not
    known (any field may come with any status)."""
    names: dict[str, None] = {}
    for shape in shapes(schema):
        spec = shape.properties.get(key)
        decl = _status_values(spec) if key in shape.properties else ([], True)
        if decl is None:
            return None
        values, nullable = decl
        unit = nullable or key not in shape.required or None in values
        if status in values or (status == "_" and unit):
            names.update(dict.fromkeys(shape.properties))
    return list(names)


class Statuses(NamedTuple):
    """What a role's schema says about the statuses it can route on."""

    known: bool  # False: any string is possible, edges cannot be checked
    values: tuple[str, ...] = ()  # declared values, each needs an edge
    unit_possible: bool = False  # the output may lack a string status and route on "_"
    declared: bool = True  # False: the schema has fields but no status at all
    bad: tuple[Any, ...] = ()  # non-string declared values (a YAML slip)
    open_status: bool = False  # not known because a status has no enum/const


OPEN = Statuses(known=False)


def _status_values(spec: Any, depth: int = 0) -> tuple[list[Any], bool] | None:
    """(values, nullable) of a status property, None when it allows any string."""
    if not isinstance(spec, dict) or depth > MAX_DEPTH:
        return None
    if "const" in spec:
        return [spec["const"]], False
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"]), False
    for key in ("anyOf", "oneOf"):
        members = spec.get(key)
        if not isinstance(members, list):
            continue
        values: list[Any] = []
        nullable = False
        for member in members:
            if isinstance(member, dict) and member.get("type") == "null":
                nullable = True
                continue
            inner = _status_values(member, depth + 1)
            if inner is None:
                return None
            values.extend(inner[0])
            nullable = nullable or inner[1]
        return values, nullable
    return None


def statuses(schema: Any, key: str = "status") -> Statuses:
    """The statuses a role with this output schema can route on (see the module docstring);
    ``key`` is the field routing reads (``$status`` in a version-1 workflow)."""
    found = shapes(schema)
    if not found:
        return OPEN
    raw: list[Any] = []
    unit = declared = False
    for shape in found:
        if key not in shape.properties:
            unit = True
            continue
        declared = True
        decl = _status_values(shape.properties[key])
        if decl is None:
            return Statuses(known=False, open_status=True)
        raw.extend(decl[0])
        unit = unit or decl[1] or key not in shape.required
    if not declared:
        return Statuses(known=True, unit_possible=True, declared=False)
    values = tuple(dict.fromkeys(v for v in raw if isinstance(v, str)))
    odd = [v for v in raw if v is not None and not isinstance(v, str)]
    # de-duplicated by JSON spelling: lists and mappings are not hashable
    bad = tuple({json.dumps(v, sort_keys=True, default=str): v for v in odd}.values())
    return Statuses(known=True, values=values, unit_possible=unit or None in raw, bad=bad)
