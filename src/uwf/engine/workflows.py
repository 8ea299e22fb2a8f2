"""Workflow files: validation, materialisation, the registry, history and resolution.

A workflow file (PORT §4, REFERENCE §3) is a YAML mapping with exactly ``name``,
``description``, ``roles`` and ``graph``. It is checked completely before anything is
written, and every problem found is reported at once: the error message is one header line
``invalid workflow <file>: <n> problems`` followed by one ``  - <where>: <what>`` line per
problem, so a user fixes a file in one round instead of one error at a time.

What is checked, beyond the shape and the types of every field:

* ``name`` and every role name are plain identifiers (``^[A-Za-z_][A-Za-z0-9_-]{0,63}$``),
  so nothing from a workflow file can become a command-line flag or a path; ``name`` must
  equal the file stem.
* A role's ``meta`` (or its other name ``frontmatter``) is a JSON Schema mapping; unknown
  keys are refused at the top level, in roles and in targets (a typo is never silently
  dropped); the legacy list/``conditions`` graph form gets a message that explains the
  status-based form.
* The graph: ``$START`` routes on exactly the unit status ``_`` to a role; every target is a
  role or ``$END``; every graph key is a role or ``$START``; every role has an outgoing edge;
  every prompt is non-blank and parses as Mustache.
* Status consistency between a role's schema and its edges. The statuses a role can emit
  follow from how the moderator reads them (``output.status`` when it is a string, else the
  unit status ``_``) and from how agents build an output (the frontmatter fast path keeps only
  the fields the schema declares, REFERENCE §5.6–5.7):

  - ``properties.status`` with ``enum`` or ``const`` (also inside ``anyOf``/``oneOf`` of the
    property, or of the schema): exactly those values. Each needs an edge, and an edge on any
    other status is refused. A ``null`` value, or a status that is not required, also lets
    the output route on ``_``: an edge on ``_`` is then allowed, and a missing one is only a
    warning. Non-string values (YAML ``yes``/``no``/numbers) are refused.
  - ``properties.status`` without ``enum``/``const`` (any string), or a schema that declares
    no fields at all: the statuses cannot be known, so edges are not checked.
  - Fields declared but no ``status`` among them: the output never carries a status, so the
    role always routes on ``_``. It must have a ``_`` edge and no other.

Roles that cannot be reached from ``$START`` are warnings, not errors.

The registry (``registry.yaml``, name -> current hash) is only changed under its lock;
``history`` and ``rollback`` work from the CAS type index of the Workflow schema, so every
version ever stored stays available. ``resolve_for_start`` implements REFERENCE §1.4: a hash,
then an explicit file path, then project-local ``.workflow/`` and ``.workflows/`` files up
the directory tree, then the registry.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.backend.base import Backend
from uwf.cas.schema import check_schema
from uwf.cas.store import Store
from uwf.moderator.evaluate import END, START, UNIT, check_template
from uwf.protocol import schemas
from uwf.protocol.schemas import is_name
from uwf.util import yamlio
from uwf.util.base32 import NodeHash, check_hash, describe, is_hash
from uwf.util.errors import InvalidInput, NotFound, oneline
from uwf.util.jsonfmt import canonical
from uwf.util.log import ProcessLog

ROLE_FIELDS = ("description", "goal", "capabilities", "procedure", "output", "meta")
TOP_FIELDS = ("name", "description", "roles", "graph")
TARGET_FIELDS = ("role", "prompt")
EXTENSIONS = (".yaml", ".yml")
LOCAL_DIRS = (".workflow", ".workflows")

NOT_A_MAPPING = "expected a mapping with name, description, roles and graph"
LEGACY = (
    "graph uses the legacy list/conditions form; use status-based routing: "
    "graph[<role>][<status>] = {role: <next role or $END>, prompt: <mustache template>}"
)
_NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
_SEG_RE = re.compile(r"^[A-Za-z0-9_$-]+$")


# -- reading and validating ------------------------------------------------------------


@dataclass
class _Problems:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{where}: {what}" if where else what)


def _seg(key: Any) -> str:
    """One path segment of a problem location: ``.key`` or ``["odd key"]``."""
    if isinstance(key, str) and _SEG_RE.match(key):
        return f".{key}"
    return f"[{json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=False)}]"


def _loc(*keys: Any) -> str:
    return "".join(_seg(k) for k in keys).lstrip(".")


def _kind(value: Any) -> str:
    """How a YAML value reads to a user: ``a list``, ``a string``, ``null``…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _key_text(key: Any) -> str:
    """A key as YAML/JSON would spell it: ``"text"``, ``true``, ``1``, ``null``."""
    if key is None or isinstance(key, (str, bool, int, float)):
        return json.dumps(key, ensure_ascii=False)
    return repr(key)


def _stem(basename: str) -> str:
    for ext in EXTENSIONS:
        if basename.endswith(ext):
            return basename[: -len(ext)]
    return basename


def _read(path: Path, shown: str, local: bool) -> Any:
    """The parsed YAML document of ``path``; single-line errors for file-level problems."""
    shown = oneline(shown)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        prefix = "project workflow file not found" if local else "file not found"
        raise NotFound(f"{prefix}: {shown}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read workflow file {shown}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"invalid workflow file {shown}: not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        document = yamlio.load(text, source=f"workflow file {shown}")
    except InvalidInput as exc:
        message = exc.message.replace('"<unicode string>"', json.dumps(shown))
        if local and message.startswith("invalid YAML: "):
            message = f"invalid YAML in {shown}: {message[len('invalid YAML: ') :]}"
        raise InvalidInput(message) from None
    if not isinstance(document, dict):
        where = f" in {shown}" if local else ""
        raise InvalidInput(f"invalid workflow YAML{where}: {NOT_A_MAPPING}")
    return document


def _string(p: _Problems, value: Any, *where: Any, present: bool = True) -> str | None:
    if not present:
        p.add(_loc(*where), "missing (expected a string)")
        return None
    if not isinstance(value, str):
        p.add(_loc(*where), f"expected a string, got {_kind(value)}")
        return None
    return value


def _check_meta(p: _Problems, role: str, key: str, meta: Any) -> dict[str, Any] | None:
    where = _loc("roles", role, key)
    if not isinstance(meta, dict):
        p.add(where, f"expected a JSON Schema mapping, got {_kind(meta)}")
        return None
    try:
        meta = canonical(meta)
        check_schema(meta)
    except InvalidInput as exc:
        p.add(where, exc.message)
        return None
    result: dict[str, Any] = meta
    return result


def _check_role(p: _Problems, role: Any, spec: Any) -> dict[str, Any] | None:
    """Normalise one role definition (``frontmatter`` becomes ``meta``).

    Returns the role as far as it could be read (None without a usable schema), so that its
    edges are still checked against its statuses: every problem is reported in one round.
    The result is only used when no problem at all was found.
    """
    if not isinstance(role, str):
        p.add("roles", f"role name {_key_text(role)} is not a string")
        return None
    if not is_name(role):
        p.add(_loc("roles", role), f"role name is not a plain identifier ({_NAME_RULE})")
    if not isinstance(spec, dict):
        p.add(_loc("roles", role), f"expected a mapping (a role definition), got {_kind(spec)}")
        return None
    out: dict[str, Any] = {}
    for key in spec:
        if key not in ROLE_FIELDS and key != "frontmatter":
            p.add(
                _loc("roles", role, key) if isinstance(key, str) else _loc("roles", role),
                f"unknown key {_key_text(key)} (a role has description, goal, capabilities, "
                "procedure, output and meta)",
            )
    for key in ("description", "goal", "procedure", "output"):
        value = _string(p, spec.get(key), "roles", role, key, present=key in spec)
        out[key] = value
    caps = spec.get("capabilities")
    if "capabilities" not in spec:
        p.add(_loc("roles", role, "capabilities"), "missing (expected a list of strings)")
    elif not isinstance(caps, list):
        p.add(_loc("roles", role, "capabilities"), f"expected a list of strings, got {_kind(caps)}")
    else:
        for i, cap in enumerate(caps):
            if not isinstance(cap, str):
                p.add(
                    f"{_loc('roles', role, 'capabilities')}[{i}]",
                    f"expected a string, got {_kind(cap)}",
                )
        out["capabilities"] = caps
    if "meta" in spec and "frontmatter" in spec:
        p.add(
            _loc("roles", role),
            'has both "meta" and "frontmatter" (one is another name for the other)',
        )
        return None
    key = "meta" if "meta" in spec or "frontmatter" not in spec else "frontmatter"
    if key not in spec:
        p.add(
            _loc("roles", role, "meta"),
            'missing (expected a JSON Schema mapping; "frontmatter" is accepted as another name)',
        )
        return None
    meta = _check_meta(p, role, key, spec[key])
    if meta is None:
        return None
    out["meta"] = meta
    return {key: out.get(key) for key in ROLE_FIELDS}


def _check_graph(p: _Problems, graph: dict[Any, Any], roles: set[str]) -> dict[str, Any]:
    """Normalise the graph (targets rebuilt as {role, prompt}); report every broken edge."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for node, edges in graph.items():
        if not isinstance(node, str):
            p.add(
                "graph",
                f"key {_key_text(node)} is not a string (graph keys are $START and role names)",
            )
            continue
        if node == END:
            p.add(_loc("graph", node), "$END ends a thread and cannot have edges")
            continue
        if node != START and node not in roles:
            p.add(
                _loc("graph", node),
                f"{_key_text(node)} is not a role (graph keys are $START and role names)",
            )
        if edges is None:  # `reviewer:` with nothing under it: reported as "no outgoing edge"
            continue
        if not isinstance(edges, dict):
            p.add(
                _loc("graph", node),
                f"expected a mapping of status -> {{role, prompt}}, got {_kind(edges)}",
            )
            continue
        out[node] = {}
        for status, target in edges.items():
            if not isinstance(status, str):
                p.add(
                    _loc("graph", node),
                    f"status {_key_text(status)} is {_kind(status)}, not a string; "
                    "quote it in the YAML",
                )
                continue
            where = _loc("graph", node, status)
            if status == "":
                p.add(where, "a status must be a non-empty string")
                continue
            if not isinstance(target, dict):
                p.add(where, f"expected a mapping {{role, prompt}}, got {_kind(target)}")
                continue
            bad = [k for k in target if k not in TARGET_FIELDS]
            for key in bad:
                p.add(where, f"unknown key {_key_text(key)} (a target has only role and prompt)")
            role = target.get("role")
            prompt = target.get("prompt")
            good = not bad
            if not isinstance(role, str):
                what = "missing" if "role" not in target else f"got {_kind(role)}"
                p.add(f"{where}.role", f"{what} (expected a role name or $END)")
                good = False
            elif role == START:
                p.add(where, "cannot route to $START (route to a role or $END)")
                good = False
            elif role != END and role not in roles:
                known = ", ".join(sorted(roles)) or "none"
                p.add(where, f"routes to unknown role {_key_text(role)} (roles: {known})")
                good = False
            elif node == START and role == END:
                p.add(where, "$START must route to a role, not $END")
                good = False
            if not isinstance(prompt, str) or not prompt.strip():
                p.add(f"{where}.prompt", "prompt is required (non-empty string)")
                good = False
            else:
                problem = check_template(prompt)
                if problem is not None:
                    p.add(f"{where}.prompt", f"prompt template does not parse: {problem}")
                    good = False
            if good:
                out[node][status] = {"role": str(role), "prompt": str(prompt)}
    return out


@dataclass(frozen=True)
class RoleStatuses:
    """What a role's schema says about the statuses it can emit."""

    known: bool  # False: any string is possible, edges are not checked
    values: tuple[str, ...] = ()  # declared values, each needs an edge
    unit_possible: bool = False  # the output may lack a string status and route on "_"
    declared: bool = True  # False: the schema has fields but no status at all
    bad: tuple[Any, ...] = ()  # non-string declared values (a YAML slip)


_OPEN = RoleStatuses(known=False)


def _variants(schema: dict[str, Any]) -> list[tuple[dict[str, Any], set[str]]]:
    """The object shapes whose fields an agent fills (REFERENCE §5.6 field discovery).

    ``properties`` of the schema itself, else those of each ``anyOf`` (checked first) or
    ``oneOf`` variant; each with its ``required`` names. Empty: the schema declares no fields.
    """
    props = schema.get("properties")
    if isinstance(props, dict):
        req = schema.get("required")
        return [(props, set(req) if isinstance(req, list) else set())]
    for key in ("anyOf", "oneOf"):
        out = []
        for variant in schema.get(key) or []:
            if isinstance(variant, dict) and isinstance(variant.get("properties"), dict):
                req = variant.get("required")
                out.append((variant["properties"], set(req) if isinstance(req, list) else set()))
        if out:
            return out
    return []


def _status_values(spec: Any) -> tuple[list[Any], bool] | None:
    """(values, nullable) of a status property, None when it allows any string."""
    if not isinstance(spec, dict):
        return None
    if "const" in spec:
        return [spec["const"]], False
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"]), False
    for key in ("anyOf", "oneOf"):
        variants = spec.get(key)
        if not isinstance(variants, list):
            continue
        values: list[Any] = []
        nullable = False
        for variant in variants:
            if isinstance(variant, dict) and variant.get("type") == "null":
                nullable = True
                continue
            inner = _status_values(variant)
            if inner is None:
                return None
            values.extend(inner[0])
            nullable = nullable or inner[1]
        return values, nullable
    return None


def statuses_of(schema: dict[str, Any]) -> RoleStatuses:
    """The statuses a role with this output schema can route on (see the module docstring)."""
    variants = _variants(schema)
    if not variants:
        return _OPEN
    raw: list[Any] = []
    unit = declared = False
    for props, required in variants:
        if "status" not in props:
            unit = True
            continue
        declared = True
        decl = _status_values(props["status"])
        if decl is None:
            return _OPEN
        raw.extend(decl[0])
        unit = unit or decl[1] or "status" not in required
    if not declared:
        return RoleStatuses(known=True, unit_possible=True, declared=False)
    values = tuple(dict.fromkeys(v for v in raw if isinstance(v, str)))
    odd = [v for v in raw if v is not None and not isinstance(v, str)]
    # de-duplicated by JSON spelling: lists and mappings are not hashable
    bad = tuple({json.dumps(v, sort_keys=True, default=str): v for v in odd}.values())
    return RoleStatuses(known=True, values=values, unit_possible=unit or None in raw, bad=bad)


def _check_statuses(
    p: _Problems, names: list[str], roles: dict[str, dict[str, Any]], raw_graph: dict[Any, Any]
) -> None:
    """Every role has an edge; edges and the statuses its schema declares agree."""
    for role in names:
        if not raw_graph.get(role):
            p.add(
                _loc("roles", role),
                f"has no outgoing edge (add graph{_seg(role)}[<status>] = "
                "{role: <next role or $END>, prompt: <mustache template>})",
            )
            continue
        if role not in roles or not isinstance(raw_graph[role], dict):
            continue
        st = statuses_of(roles[role]["meta"])
        if not st.known:
            continue
        meta_loc = _loc("roles", role, "meta")
        edges = [s for s in raw_graph[role] if isinstance(s, str) and s]
        for value in st.bad:
            p.add(
                meta_loc, f"status value {json.dumps(value)} is not a string; quote it in the YAML"
            )
        if st.bad:
            continue  # its edges cannot be checked against values that are not statuses
        if not st.declared:
            for status in edges:
                if status != UNIT:
                    p.add(
                        _loc("graph", role, status),
                        f"{meta_loc} declares no status property, "
                        'so the role always routes on "_"; '
                        f"declare properties.status.enum to route on {json.dumps(status)}",
                    )
            if UNIT not in raw_graph[role]:
                p.add(
                    _loc("graph", role),
                    f'no edge for status "_" ({meta_loc} declares no status property, '
                    'so the role always routes on "_")',
                )
            continue
        allowed = set(st.values) | ({UNIT} if st.unit_possible else set())
        shown = json.dumps(list(st.values), ensure_ascii=False, separators=(",", ":"))
        for status in edges:
            if status not in allowed:
                p.add(
                    _loc("graph", role, status),
                    f"{meta_loc} cannot emit status {json.dumps(status, ensure_ascii=False)} "
                    f"(its status values are {shown})",
                )
        for value in st.values:
            if value not in raw_graph[role]:
                p.add(
                    _loc("graph", role),
                    f"no edge for status {json.dumps(value, ensure_ascii=False)} "
                    f"declared in {meta_loc}",
                )
        if st.unit_possible and UNIT not in st.values and UNIT not in raw_graph[role]:
            p.warnings.append(
                f'{meta_loc}: an output without a string status routes on "_", which has no '
                f'edge in graph{_seg(role)} (add status to required, or add a "_" edge)'
            )


def _unreachable(graph: dict[str, Any], roles: dict[str, Any]) -> list[str]:
    seen: set[str] = set()
    todo = [START]
    while todo:
        node = todo.pop()
        for target in graph.get(node, {}).values():
            nxt = target["role"]
            if nxt in roles and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return [r for r in roles if r not in seen]


def _validate(document: dict[Any, Any], basename: str) -> tuple[dict[str, Any], _Problems]:
    p = _Problems()
    legacy = "conditions" in document
    for key in document:
        if key not in TOP_FIELDS and key != "conditions":
            p.add(
                _loc(key) if isinstance(key, str) else "",
                f"unknown top-level key {_key_text(key)} "
                "(a workflow has name, description, roles and graph)",
            )
    name = _string(p, document.get("name"), "name", present="name" in document)
    if name is not None:
        if not is_name(name):
            p.add("name", f"{describe(name)} is not a plain identifier ({_NAME_RULE})")
        stem = _stem(basename)
        if stem != name:
            p.add(
                "",
                f'workflow name mismatch: file "{basename}" implies name "{stem}" '
                f'but YAML declares name "{name}"',
            )
    description = _string(
        p, document.get("description"), "description", present="description" in document
    )

    roles: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    raw_roles = document.get("roles")
    if "roles" not in document:
        p.add("roles", "missing (expected a mapping of role name -> role definition)")
    elif not isinstance(raw_roles, dict):
        p.add(
            "roles", f"expected a mapping of role name -> role definition, got {_kind(raw_roles)}"
        )
    else:
        for role, spec in raw_roles.items():
            if isinstance(role, str):
                names.append(role)
            checked = _check_role(p, role, spec)
            if checked is not None:
                roles[role] = checked

    graph: dict[str, Any] = {}
    raw_graph = document.get("graph")
    if "graph" not in document:
        p.add(
            "graph",
            "missing (expected a mapping: graph[<role or $START>][<status>] = {role, prompt})",
        )
    elif isinstance(raw_graph, list) or (
        isinstance(raw_graph, dict) and any(isinstance(v, list) for v in raw_graph.values())
    ):
        legacy = True
    elif not isinstance(raw_graph, dict):
        p.add(
            "graph",
            f"expected a mapping of node -> status -> {{role, prompt}}, got {_kind(raw_graph)}",
        )
    else:
        graph = _check_graph(p, raw_graph, set(names))
        start = raw_graph.get(START)
        if START not in raw_graph:
            p.add(
                "graph",
                "no $START edge (add graph.$START._ = {role: <first role>, prompt: <template>})",
            )
        elif isinstance(start, dict):
            for status in start:
                if status != UNIT:
                    p.add(_loc("graph", START, status), '$START routes only on the unit status "_"')
            if UNIT not in start:
                p.add(_loc("graph", START), 'no edge for the unit status "_"')
        _check_statuses(p, names, roles, raw_graph)
    if legacy:
        p.add("", LEGACY)
    if not p.lines:
        p.warnings.extend(
            f"{_loc('roles', r)}: not reachable from $START" for r in _unreachable(graph, roles)
        )
    definition = {"name": name, "description": description, "roles": roles, "graph": graph}
    return definition, p


def _check_file(path: Path, shown: str, local: bool) -> dict[str, Any]:
    document = _read(path, shown, local)
    definition, p = _validate(document, path.name)
    if p.lines:
        n = len(p.lines)
        header = f"invalid workflow {shown}: {n} problem{'s' if n != 1 else ''}"
        raise InvalidInput("\n".join([header, *(f"  - {line}" for line in p.lines)]))
    definition["warnings"] = p.warnings
    return definition


def load_file(path: Path) -> dict[str, Any]:
    """Read and validate a workflow file; return its normalised definition.

    The result is ``{name, description, roles, graph, warnings}``: roles carry their schema
    inline under ``meta`` (``frontmatter`` renamed), targets are ``{role, prompt}``, and
    ``warnings`` lists non-fatal findings (unreachable roles…) for the caller to show.
    Raises NotFound for a missing file, InvalidInput for everything else — one header line
    and one line per problem.
    """
    return _check_file(path, str(path), local=False)


# -- materialising ---------------------------------------------------------------------


def materialise(store: Store, definition: dict[str, Any]) -> dict[str, Any]:
    """Store every role's schema and return the Workflow payload that refers to them.

    A schema without a ``title`` gets ``<workflow>.<role>``; the stored role keeps exactly the
    six fields, ``meta`` being the schema node's hash. The payload itself is not stored here.
    """
    name = definition["name"]
    roles: dict[str, Any] = {}
    for role, spec in definition["roles"].items():
        schema = dict(spec["meta"])
        schema.setdefault("title", f"{name}.{role}")
        roles[role] = {
            "description": spec["description"],
            "goal": spec["goal"],
            "capabilities": list(spec["capabilities"]),
            "procedure": spec["procedure"],
            "output": spec["output"],
            "meta": store.put_schema(schema),
        }
    graph = {
        node: {status: {"role": t["role"], "prompt": t["prompt"]} for status, t in edges.items()}
        for node, edges in definition["graph"].items()
    }
    return {"name": name, "description": definition["description"], "roles": roles, "graph": graph}


def store_definition(store: Store, definition: dict[str, Any]) -> str:
    """Materialise a validated definition and store it as a Workflow node; return its hash."""
    h = schemas.ensure(store)
    return store.put(h.workflow, materialise(store, definition))


# -- the registry ----------------------------------------------------------------------


@dataclass(frozen=True)
class PutResult:
    """What ``workflow put`` prints (``output()``) and what it reports on stderr."""

    name: str
    hash: str
    warnings: list[str]

    def output(self) -> dict[str, str]:
        return {"name": self.name, "hash": self.hash}


def put_workflow(backend: Backend, path: Path) -> PutResult:
    """Validate a workflow file, store it and point the registry entry of its name at it.

    Nothing is written unless the whole file is valid. Putting the same file twice gives the
    same hash and leaves the registry file untouched.
    """
    definition = load_file(path)
    h = check_hash(store_definition(backend.nodes, definition))
    name = definition["name"]
    previous = backend.registry.set(name, h)
    if previous != h:
        ProcessLog(backend.root, workflow=h).write(
            "H5R9C2X7", f"workflow registered name={name} hash={h} previous={previous}"
        )
    return PutResult(name, h, list(definition["warnings"]))


def _shown(ident: str) -> str:
    return ident if ident.isprintable() and len(ident) <= 100 else describe(ident, 100)


def _require_workflow(store: Store, h: str) -> Any:
    node = store.get(h)
    if node is None:
        raise NotFound(f"CAS node not found: {h}")
    if node.type != schemas.hashes().workflow:
        raise InvalidInput(f"node {h} is not a Workflow (type {node.type})")
    return node


def show_workflow(backend: Backend, ident: str) -> dict[str, Any]:
    """``{hash, name, type, payload, timestamp}`` of a registered name or a Workflow hash.

    ``name`` is the registry name pointing at that hash (null when no entry does, e.g. an
    older version).
    """
    ident = ident.strip()
    if not ident:
        raise InvalidInput("workflow ID cannot be empty")
    registry = backend.registry.read()
    name: str | None
    if ident in registry:
        h, name = registry[ident], ident
    elif is_hash(ident):
        h = NodeHash(ident)
        name = next((k for k, v in registry.items() if v == h), None)
    else:
        raise NotFound(f"workflow not found: {_shown(ident)}")
    node = _require_workflow(backend.nodes, h)
    return {
        "hash": h,
        "name": name,
        "type": node.type,
        "payload": node.payload,
        "timestamp": node.timestamp,
    }


def _local_names(cwd: Path) -> list[str]:
    try:
        entries = sorted(os.scandir(cwd / ".workflows"), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names: list[str] = []
    for entry in entries:
        stem = _stem(entry.name)
        if stem != entry.name and is_name(stem) and entry.is_file() and stem not in names:
            names.append(stem)
    return names


def list_workflows(backend: Backend, cwd: Path) -> list[dict[str, str]]:
    """Project workflows of ``<cwd>/.workflows/`` first, then registry entries they do not shadow.

    Local files are listed by name (sorted, not read); only plain-identifier stems are shown,
    since only those can be started by name.
    """
    local = _local_names(cwd)
    out = [{"name": n, "hash": "(local)", "origin": "local"} for n in local]
    for name, h in backend.registry.read().items():
        if name not in local:
            out.append({"name": name, "hash": h, "origin": "global"})
    return out


def history(backend: Backend, name: str) -> list[dict[str, Any]]:
    """Every stored version of a workflow, oldest first, marking the registry's current one."""
    if not name.strip():
        raise InvalidInput("workflow ID cannot be empty")
    store = backend.nodes
    current = backend.registry.get(name)
    out: list[dict[str, Any]] = []
    for h in store.index(schemas.hashes().workflow):
        node = store.get(h)
        if node is None or not isinstance(node.payload, dict) or node.payload.get("name") != name:
            continue
        out.append({"hash": h, "timestamp": node.timestamp, "current": h == current})
    if current is not None and all(v["hash"] != current for v in out):
        node = store.get(current)
        if node is not None and node.type == schemas.hashes().workflow:
            out.append({"hash": current, "timestamp": node.timestamp, "current": True})
    if not out:
        raise NotFound(f"workflow not found: {_shown(name)}")
    return out


def rollback(backend: Backend, name: str, h: str) -> dict[str, Any]:
    """Point the registry entry of ``name`` at an earlier (or any) stored version ``h``."""
    if not is_name(name):
        raise InvalidInput(f"invalid workflow name: {describe(name)} ({_NAME_RULE})")
    version = check_hash(h)
    node = _require_workflow(backend.nodes, version)
    stored_name = node.payload.get("name") if isinstance(node.payload, dict) else None
    if stored_name != name:
        raise InvalidInput(
            f'workflow {h} is named {json.dumps(stored_name, ensure_ascii=False)}, not "{name}"'
        )
    previous = backend.registry.set(name, version)
    if previous != h:
        ProcessLog(backend.root, workflow=h).write(
            "T3G8B5N2", f"workflow rolled back name={name} hash={h} previous={previous}"
        )
    return {"name": name, "hash": h, "previous": previous}


# -- thread start ----------------------------------------------------------------------


def looks_like_path(ident: str) -> bool:
    return "/" in ident or "\\" in ident or ident.endswith(EXTENSIONS)


def _discover(name: str, cwd: Path) -> Path | None:
    """The closest ``.workflow/`` or ``.workflows/`` file for ``name``, up to the root."""
    start = Path(os.path.abspath(cwd))
    for directory in (start, *start.parents):
        for sub in LOCAL_DIRS:
            for ext in EXTENSIONS:
                candidate = directory / sub / f"{name}{ext}"
                if candidate.is_file():
                    return candidate
    return None


def _store_local(backend: Backend, path: Path) -> NodeHash:
    definition = _check_file(path, str(path), local=True)
    return check_hash(store_definition(backend.nodes, definition))


def resolve_for_start(backend: Backend, ident: str, cwd: Path) -> NodeHash:
    """The Workflow hash ``thread start <ident>`` runs (REFERENCE §1.4).

    In order: a well-formed hash (must be a stored Workflow); an explicit file path (contains
    ``/`` or ``\\``, or ends in ``.yaml``/``.yml``; relative to ``cwd``); a project-local
    ``.workflow/<name>.yaml|yml`` or ``.workflows/<name>.yaml|yml`` in ``cwd`` or the closest
    ancestor (names only); the registry. Files are validated and stored, never registered.
    """
    ident = ident.strip()
    if not ident:
        raise InvalidInput("workflow ID cannot be empty")
    store = backend.nodes
    if is_hash(ident):
        _require_workflow(store, ident)
        return NodeHash(ident)
    if looks_like_path(ident):
        path = Path(ident)
        if not path.is_absolute():
            path = Path(os.path.abspath(cwd / path))
        return _store_local(backend, path)
    if is_name(ident):
        found = _discover(ident, cwd)
        if found is not None:
            return _store_local(backend, found)
        h = backend.registry.get(ident)
        if h is not None:
            _require_workflow(store, h)
            return h
    raise NotFound(f"workflow not found: {_shown(ident)}")
