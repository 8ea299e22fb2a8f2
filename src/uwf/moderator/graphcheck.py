"""The workflow validator's checks of the graph: every edge, ``$START``, and the agreement
between a role's edges and the statuses its schema lets it emit (``uwf.moderator.emits``).

Each function adds what it finds to a :class:`Problems`; nothing here raises. Each takes the
workflow's ``Rules`` (``uwf.moderator.evaluate``): a version-1 file routes on ``$status``,
``$START`` on ``new`` and ``resume``, its prompts are Liquid and an edge may carry
``location``. ``$SUSPEND`` is never routed, in either format: an output with it suspends the
thread, so no edge may be keyed by it and no role needs one for it.
"""

from __future__ import annotations

import json
from typing import Any

from uwf.moderator import emits
from uwf.moderator.evaluate import (
    BODY,
    END,
    START,
    SUSPEND,
    UNIT,
    V05,
    V1,
    Rules,
    check_template,
    output_names,
)
from uwf.moderator.problems import Problems, key_text, kind, loc, seg
from uwf.protocol import schemas, workflow_schemas

TARGET_FIELDS = tuple(workflow_schemas.TARGET["properties"])  # role, prompt
TARGET_FIELDS_V1 = tuple(workflow_schemas.TARGET_V1["properties"])  # role, prompt, location
TEMPLATE_NAMES = {0: "mustache template", 1: "Liquid template"}


def _target_role(
    p: Problems, where: str, node: str, target: dict[Any, Any], roles: set[str]
) -> bool:
    """Report where a target's ``role`` cannot route; True when it is usable."""
    role = target.get("role")
    if not isinstance(role, str):
        return False  # missing or not a string: the file schema said so
    if role == START:
        p.add(where, "cannot route to $START (route to a role or $END)")
    elif role != END and role not in roles:
        known = ", ".join(sorted(roles)) or "none"
        p.add(where, f"routes to unknown role {key_text(role)} (roles: {known})")
    elif node == START and role == END:
        p.add(where, "$START must route to a role, not $END")
    else:
        return True
    return False


def _target_prompt(p: Problems, where: str, prompt: Any, rules: Rules) -> bool:
    if rules.version == 1 and prompt is None:
        return True  # a version-1 edge may leave its prompt out: an empty instruction
    if not isinstance(prompt, str) or (rules.version == 0 and not prompt.strip()):
        return False  # missing or blank: the file schema said so
    problem = check_template(prompt, rules.dialect)
    if problem is not None:
        p.add(f"{where}.prompt", f"prompt template does not parse: {problem}")
        return False
    return True


def _target_location(p: Problems, where: str, location: Any) -> bool:
    """A version-1 edge's ``location``: a literal directory (the file schema checks its type)."""
    if location is None:
        return True
    if not isinstance(location, str):
        return False
    if "{{" in location or "{%" in location:
        p.add(
            f"{where}.location",
            "is a template; uwf-py takes location as a literal directory "
            "(what an agent wrote never chooses where the next agent works)",
        )
        return False
    if not location.isprintable():
        p.add(f"{where}.location", "must be one line of printable characters")
        return False
    return True


def _check_target(
    p: Problems, node: str, status: Any, target: Any, roles: set[str], rules: Rules = V05
) -> dict[str, Any] | None:
    """One edge ``graph[node][status]``, normalised to ``{role, prompt}`` (and ``location``
    when a version-1 edge has one); None when broken.

    Its shape (a mapping of exactly ``role`` and ``prompt``, both strings) is the file
    schema's to report (``uwf.moderator.validate``); this checks where it routes."""
    if not isinstance(status, str):
        p.add(
            loc("graph", node),
            f"status {key_text(status)} is {kind(status)}, not a string; quote it in the YAML",
        )
        return None
    where = loc("graph", node, status)
    if status == "":
        p.add(where, "a status must be a non-empty string")
        return None
    if status == SUSPEND:
        p.add(
            where,
            f"{SUSPEND} is never routed: an output with it suspends the thread until "
            "`uwf thread resume` (remove this edge)",
        )
        return None
    if not isinstance(target, dict):
        return None
    good_role = _target_role(p, where, node, target, roles)
    good_prompt = _target_prompt(p, where, target.get("prompt"), rules)
    prompt = target.get("prompt")
    blank = prompt is None or not str(prompt).strip()
    if rules.version == 1 and good_role and target["role"] != END and good_prompt and blank:
        p.add(
            f"{where}.prompt",
            f"{'missing' if prompt is None else 'blank'}: {key_text(target['role'])} would "
            "run without an instruction (only an edge to $END may leave its prompt out)",
        )
        good_prompt = False
    fields = TARGET_FIELDS_V1 if rules.version == 1 else (*TARGET_FIELDS, "fanOut")
    good_location = rules.version == 0 or _target_location(p, where, target.get("location"))
    fan_out = target.get("fanOut") if rules.version == 0 else None
    good_fan_out = fan_out is None or _fan_out(p, where, node, target, fan_out)
    if any(key not in fields for key in target) or not (good_role and good_prompt):
        return None
    if not (good_location and good_fan_out):
        return None
    out: dict[str, Any] = {"role": str(target["role"]), "prompt": str(target.get("prompt") or "")}
    if isinstance(target.get("location"), str):
        out["location"] = target["location"]
    if fan_out is not None:
        out["fanOut"] = dict(fan_out)
    return out


MISSING_WORKFLOW = (
    "missing (expected the name of the workflow each child runs; this workflow's own name "
    "makes a recursive fan-out)"
)


def _fan_out(p: Problems, where: str, node: str, target: dict[Any, Any], spec: Any) -> bool:
    """An edge's ``fanOut`` (docs/format.md, "Fan-out and join"): what its schema cannot say
    (its shape and ``max`` are the file schema's to report). True when it is usable."""
    if not isinstance(spec, dict) or not isinstance(spec.get("field"), str):
        return False
    where = f"{where}.fanOut"
    good = True
    if node == START:
        p.add(where, "$START has no output to fan out over")
        good = False
    if target.get("role") == END:
        p.add(where, "a fan-out must route to a role, not $END (the role joins the children)")
        good = False
    workflow = spec.get("workflow")
    if isinstance(workflow, str):
        problem = schemas.workflow_name_problem(workflow)
        if problem is not None:
            p.add(f"{where}.workflow", f"{key_text(workflow)} {problem}")
            good = False
    elif workflow is None:  # the children would run this workflow again, unasked
        p.add(f"{where}.workflow", MISSING_WORKFLOW)
    task = spec.get("task")
    if isinstance(task, str):
        problem = check_template(task)
        if problem is not None:
            p.add(f"{where}.task", f"task template does not parse: {problem}")
            good = False
    return good


def _node_ok(p: Problems, node: Any, edges: Any, roles: set[str]) -> bool:
    """Report what is wrong with a graph key and its edges; True when its edges can be read."""
    if not isinstance(node, str):
        p.add(
            "graph", f"key {key_text(node)} is not a string (graph keys are $START and role names)"
        )
        return False
    if node == END:
        p.add(loc("graph", node), "$END ends a thread and cannot have edges")
        return False
    if node != START and node not in roles:
        p.add(
            loc("graph", node),
            f"{key_text(node)} is not a role (graph keys are $START and role names)",
        )
    # None (`reviewer:` with nothing under it) is reported as "no outgoing edge", anything
    # else that is not a mapping by the file schema
    return isinstance(edges, dict)


def check_graph(
    p: Problems, graph: dict[Any, Any], roles: set[str], rules: Rules = V05
) -> dict[str, Any]:
    """Normalise the graph (targets rebuilt as {role, prompt}); report every broken edge."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for node, edges in graph.items():
        if not _node_ok(p, node, edges, roles):
            continue
        out[node] = {}
        for status, target in edges.items():
            checked = _check_target(p, node, status, target, roles, rules)
            if checked is not None:
                out[node][status] = checked
    return out


def check_start(p: Problems, graph: dict[Any, Any], rules: Rules = V05) -> None:
    """``$START`` exists and routes on exactly the unit status (version 1: on ``new``, and
    maybe ``resume``)."""
    start = graph.get(START)
    if rules.version == 1:
        _check_start_v1(p, graph, rules)
    elif START not in graph:
        p.add(
            "graph",
            "no $START edge (add graph.$START._ = {role: <first role>, prompt: <template>})",
        )
    elif isinstance(start, dict):
        for status in start:
            if status in V1.start:  # a uwf 0.8 file that left out its version
                p.add(
                    loc("graph", START, status),
                    '$START routes only on the unit status "_" in a file without a version; '
                    f'"{status}" is an edge of version 1, uwf 0.8\'s format: add version: 1 '
                    "at the top of the file",
                )
            elif status != UNIT:
                p.add(loc("graph", START, status), '$START routes only on the unit status "_"')
        if UNIT not in start:
            p.add(loc("graph", START), 'no edge for the unit status "_"')


def _check_start_v1(p: Problems, graph: dict[Any, Any], rules: Rules) -> None:
    new, resume = rules.start
    start = graph.get(START)
    if START not in graph:
        p.add(
            "graph",
            f"no $START edge (add graph.$START.{new} = {{role: <first role>, prompt: <template>}})",
        )
    elif isinstance(start, dict):
        for status in start:
            if status not in rules.start:
                p.add(
                    loc("graph", START, status),
                    f'$START routes only on "{new}" (a new thread) and "{resume}" '
                    "(a thread resuming an ended one)",
                )
        if new not in start:
            p.add(loc("graph", START), f'no edge for "{new}" (the edge a new thread takes)')


def _no_status(
    p: Problems, role: str, edges: list[str], raw: dict[Any, Any], meta_loc: str, key: str
) -> None:
    """A role whose schema has fields but no status: it always routes on ``_``."""
    how = f"properties.{key}.enum"
    if key == V1.key:  # a version-1 file fixes it with const, a shape per status
        how = f"{key} with const (oneOf branches, one per status)"
    for status in edges:
        if status != UNIT:
            p.add(
                loc("graph", role, status),
                f"{meta_loc} declares no {key} property, "
                'so the role always routes on "_"; '
                f"declare {how} to route on {json.dumps(status)}",
            )
    if UNIT not in raw:
        p.add(
            loc("graph", role),
            f'no edge for status "_" ({meta_loc} declares no {key} property, '
            'so the role always routes on "_")',
        )


def _declared(
    p: Problems, role: str, st: emits.Statuses, edges: list[str], raw: dict[Any, Any], meta_loc: str
) -> None:
    """A role whose schema lists its statuses: one edge each, and no other (``$SUSPEND``
    needs none: it is never routed)."""
    allowed = set(st.values) | ({UNIT} if st.unit_possible else set())
    shown = json.dumps(list(st.values), ensure_ascii=False, separators=(",", ":"))
    for status in edges:
        if status not in allowed:
            p.add(
                loc("graph", role, status),
                f"{meta_loc} cannot emit status {json.dumps(status, ensure_ascii=False)} "
                f"(its status values are {shown})",
            )
    for value in st.values:
        if value not in raw and value != SUSPEND:
            p.add(
                loc("graph", role),
                f"no edge for status {json.dumps(value, ensure_ascii=False)} "
                f"declared in {meta_loc}",
            )
    if st.unit_possible and UNIT not in st.values and UNIT not in raw:
        p.warn(
            meta_loc,
            'an output without a string status routes on "_", which has no '
            f'edge in graph{seg(role)} (add status to required, or add a "_" edge)',
        )


def check_statuses(
    p: Problems,
    names: list[str],
    roles: dict[str, dict[str, Any]],
    graph: dict[Any, Any],
    rules: Rules = V05,
) -> None:
    """Every role has an edge; edges and the statuses its schema declares agree."""
    key = rules.key
    for role in names:
        if not graph.get(role):
            p.add(
                loc("roles", role),
                f"has no outgoing edge (add graph{seg(role)}[<status>] = "
                f"{{role: <next role or $END>, prompt: <{TEMPLATE_NAMES[rules.version]}>}})",
            )
            continue
        if role not in roles or not isinstance(graph[role], dict):
            continue
        st = emits.statuses(roles[role]["meta"], key)
        meta_loc = loc("roles", role, roles[role].get("schemaKey", "meta"))
        if st.open_status:
            p.warn(
                meta_loc,
                f"properties.{key} has no enum, so its edges cannot be checked: a step whose "
                f"status has no edge fails at run time (list the statuses in {key}.enum)",
            )
        if not st.known:
            continue
        edges = [s for s in graph[role] if isinstance(s, str) and s and s != SUSPEND]
        for value in st.bad:
            p.add(
                meta_loc, f"status value {json.dumps(value)} is not a string; quote it in the YAML"
            )
        if st.bad:
            continue  # its edges cannot be checked against values that are not statuses
        if not st.declared:
            _no_status(p, role, edges, graph[role], meta_loc, key)
        else:
            _declared(p, role, st, edges, graph[role], meta_loc)


def unreachable(graph: dict[str, Any], roles: dict[str, Any]) -> list[str]:
    """The roles no path from ``$START`` reaches."""
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


def check_variables(
    p: Problems, graph: dict[str, Any], roles: dict[str, dict[str, Any]], rules: Rules = V05
) -> None:
    """Warn about prompt variables the source's output cannot have: they render empty.

    In a version-1 prompt ``_body`` is always there: the output's text, and on a ``$START``
    edge the task (``new``) or what the person resuming the thread wrote (``resume``). A
    version-1 edge of a role is checked against the shapes that emit its status (a branch of
    a ``oneOf``), and a variable none of them has is a problem, as uwf 0.8 had it."""
    extra = {BODY} if rules.version == 1 else set()
    for node, edges in graph.items():
        if node == START:
            known: set[str] | None = set(extra)
        elif node in roles:
            names = [f.name for f in emits.fields(roles[node]["meta"])]
            # a schema without fields: anything goes
            known = set(names) | extra if names else None
        else:
            continue
        for status, target in edges.items():
            if known is None:
                continue
            if "fanOut" in target:
                _check_fan_out_field(
                    p, loc("graph", node, status, "fanOut", "field"), target, known
                )
            if rules.version == 1 and node != START:
                _check_branch(p, node, status, target, roles[node])
                continue
            for name in output_names(target["prompt"], rules.dialect):
                if name in known or (name == "children" and "fanOut" in target):
                    continue
                where = loc("graph", node, status, "prompt")
                if node == START:
                    p.warn(where, f"{{{{{name}}}}} renders empty: $START has no output")
                else:
                    meta = roles[node].get("schemaKey", "meta")
                    p.warn(
                        where,
                        f"{{{{{name}}}}} is not a field of {loc('roles', node, meta)}, so it "
                        f"renders empty (its fields: {', '.join(sorted(known))})",
                    )


def _check_branch(
    p: Problems, node: str, status: str, target: dict[str, Any], role: dict[str, Any]
) -> None:
    """A version-1 prompt reads only fields of the shapes that emit its edge's status."""
    fields = emits.fields_for(role["meta"], V1.key, status)
    if fields is None:
        fields = [f.name for f in emits.fields(role["meta"])]
    meta = loc("roles", node, role.get("schemaKey", "meta"))
    for name in output_names(target["prompt"], V1.dialect):
        if name == BODY or name in fields:
            continue
        shown = ", ".join(sorted(fields)) or "none"
        p.add(
            loc("graph", node, status, "prompt"),
            f"{{{{ {name} }}}} is not a field of the output of {meta} whose {V1.key} is "
            f"{json.dumps(status, ensure_ascii=False)} (its fields: {shown})",
        )


def _check_fan_out_field(p: Problems, where: str, target: dict[str, Any], known: set[str]) -> None:
    """A ``fanOut.field`` must be a field the role can emit (checked when it declares any)."""
    field = target["fanOut"]["field"]
    if field not in known:
        p.add(
            where,
            f"{key_text(field)} is not a field of the role's output "
            f"(its fields: {', '.join(sorted(known)) or 'none'})",
        )
