"""Draw a routing graph (``uwf.engine.views.graph.Diagram``) as inline SVG, on the server.

A small layered layout, enough for the few roles a workflow has: back edges (the loops of a
workflow, found by a depth-first walk from ``$START``) are taken out and drawn as arcs on the
right; the rest is ranked by longest path, long edges get a bend point in every rank they
cross, a few barycentre sweeps order each rank, and x positions follow the neighbours within
a minimum spacing. No script, no font files, no outside request: the same SVG serves the
live page and the exported file (docs/ui.md says why this beats shipping a browser renderer).
Every text is escaped here, once.
"""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass, field
from html import escape
from typing import Any

from uwf.engine.views.graph import Diagram
from uwf.moderator.evaluate import END, START

NODE_H = 34
RANK_GAP = 62
NODE_GAP = 34
MARGIN = 16
FONT = 13


def text_width(text: str, size: int = FONT) -> float:
    wide = sum(1 for c in text if unicodedata.east_asian_width(c) in ("W", "F"))
    return (len(text) - wide) * size * 0.58 + wide * size


@dataclass
class _Layout:
    rank: dict[Any, int] = field(default_factory=dict)
    x: dict[Any, float] = field(default_factory=dict)
    width: dict[Any, float] = field(default_factory=dict)
    layers: list[list[Any]] = field(default_factory=list)
    chains: dict[int, list[Any]] = field(default_factory=dict)  # forward edge -> its points
    back: list[int] = field(default_factory=list)
    loops: list[int] = field(default_factory=list)

    def y(self, key: Any) -> float:
        return self.y_of_rank(self.rank[key])

    def y_of_rank(self, rank: int) -> float:
        return MARGIN + rank * (NODE_H + RANK_GAP) + NODE_H / 2


def _walk(graph: Diagram) -> tuple[list[str], set[int]]:
    """Depth-first from $START (then any node not reached): (post-order, back-edge indices)."""
    out: dict[str, list[int]] = {n: [] for n in graph.nodes}
    for i, e in enumerate(graph.edges):
        out[e.source].append(i)
    state: dict[str, int] = {}
    post: list[str] = []
    back: set[int] = set()
    for root in graph.nodes:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            node, edges = stack[-1]
            for i in edges:
                target = graph.edges[i].target
                if state.get(target) == 1:
                    back.add(i)
                elif target not in state:
                    state[target] = 1
                    stack.append((target, iter(out[target])))
                    break
            else:
                state[node] = 2
                post.append(node)
                stack.pop()
    return post, back


def layout(graph: Diagram) -> _Layout:
    lay = _Layout()
    post, back = _walk(graph)
    forward = [i for i, e in enumerate(graph.edges) if i not in back and e.source != e.target]
    lay.loops = [i for i, e in enumerate(graph.edges) if e.source == e.target]
    lay.back = [i for i in sorted(back) if i not in lay.loops]
    for node in reversed(post):  # a topological order of the forward edges
        lay.rank.setdefault(node, 0)
        for i in forward:
            e = graph.edges[i]
            if e.source == node:
                lay.rank[e.target] = max(lay.rank.get(e.target, 0), lay.rank[node] + 1)
    others = [r for n, r in lay.rank.items() if n != END]
    lay.rank[END] = max(others, default=0) + 1
    for node in graph.nodes:
        lay.width[node] = max(64.0, text_width(node) + 28)
    for i in forward:
        e = graph.edges[i]
        bends = [("bend", i, r) for r in range(lay.rank[e.source] + 1, lay.rank[e.target])]
        for b in bends:
            lay.rank[b], lay.width[b] = b[2], 8.0
        lay.chains[i] = [e.source, *bends, e.target]
    lay.layers = [[] for _ in range(max(lay.rank.values()) + 1)]
    for key in [*reversed(post), *(k for k in lay.rank if isinstance(k, tuple))]:
        lay.layers[lay.rank[key]].append(key)
    _order(lay)
    _place(lay)
    return lay


def _neighbours(lay: _Layout) -> tuple[dict[Any, list[Any]], dict[Any, list[Any]]]:
    up: dict[Any, list[Any]] = {k: [] for k in lay.rank}
    down: dict[Any, list[Any]] = {k: [] for k in lay.rank}
    for chain in lay.chains.values():
        for a, b in itertools.pairwise(chain):
            down[a].append(b)
            up[b].append(a)
    return up, down


def _order(lay: _Layout, sweeps: int = 4) -> None:
    up, down = _neighbours(lay)
    for sweep in range(sweeps):
        ranks = range(1, len(lay.layers)) if sweep % 2 == 0 else range(len(lay.layers) - 2, -1, -1)
        near = up if sweep % 2 == 0 else down
        for r in ranks:
            other = lay.layers[r - 1] if sweep % 2 == 0 else lay.layers[r + 1]
            pos = {k: i for i, k in enumerate(other)}
            layer = lay.layers[r]

            keys = {}
            for index, k in enumerate(layer):
                linked = [pos[n] for n in near[k] if n in pos]
                keys[k] = sum(linked) / len(linked) if linked else float(index)
            lay.layers[r] = sorted(layer, key=keys.__getitem__)


def _fit(keys: list[Any], want: list[float], lay: _Layout) -> list[float]:
    """Positions as close to ``want`` as the minimum spacing allows (mean of two passes)."""

    def gap(a: Any, b: Any) -> float:
        return (lay.width[a] + lay.width[b]) / 2 + NODE_GAP

    left = list(want)
    for i in range(1, len(keys)):
        left[i] = max(left[i], left[i - 1] + gap(keys[i - 1], keys[i]))
    right = list(want)
    for i in range(len(keys) - 2, -1, -1):
        right[i] = min(right[i], right[i + 1] - gap(keys[i], keys[i + 1]))
    return [(a + b) / 2 for a, b in zip(left, right, strict=True)]


def _place(lay: _Layout, rounds: int = 6) -> None:
    for layer in lay.layers:
        xs = _fit(layer, [0.0] * len(layer), lay)
        lay.x.update(zip(layer, xs, strict=True))
    up, down = _neighbours(lay)
    for n in range(rounds):
        near = up if n % 2 == 0 else down
        for layer in lay.layers if n % 2 == 0 else reversed(lay.layers):
            want = []
            for k in layer:
                linked = [lay.x[m] for m in near[k]]
                want.append(sum(linked) / len(linked) if linked else lay.x[k])
            lay.x.update(zip(layer, _fit(layer, want, lay), strict=True))
    left = min(lay.x[k] - lay.width[k] / 2 for k in lay.rank)
    for k in lay.x:
        lay.x[k] += MARGIN - left


# -- drawing ------------------------------------------------------------------------------


LABEL_H = 18  # a label's box: the text's width plus 8, this high, centred on its point
LABEL_GAP = 4  # the least room between two labels, or a label and a node


def _label_width(text: str) -> float:
    return text_width(text, FONT - 1) + 8


def _label(x: float, y: float, text: str) -> str:
    w = _label_width(text)
    return (
        f'<g class="label"><rect x="{x - w / 2:.1f}" y="{y - LABEL_H / 2:.1f}" width="{w:.1f}" '
        f'height="{LABEL_H}" rx="4"/><text x="{x:.1f}" y="{y + 4:.1f}">{escape(text)}</text></g>'
    )


Box = tuple[float, float, float, float]  # left, top, right, bottom


def _box(x: float, y: float, w: float, h: float = LABEL_H) -> Box:
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def _overlaps(a: Box, b: Box) -> bool:
    return (
        a[0] < b[2] + LABEL_GAP
        and b[0] < a[2] + LABEL_GAP
        and a[1] < b[3] + LABEL_GAP
        and b[1] < a[3] + LABEL_GAP
    )


def _edge_class(graph: Diagram, i: int) -> str:
    if i in graph.taken:
        return "edge taken"
    return "edge next" if i == graph.pending else "edge"


def _forward(lay: _Layout, graph: Diagram, i: int, shift: float) -> tuple[str, float, float]:
    chain = lay.chains[i]
    pts = [(lay.x[k], lay.y(k)) for k in chain]
    pts[0] = (pts[0][0] + shift, pts[0][1] + NODE_H / 2)
    pts[-1] = (pts[-1][0] + shift, pts[-1][1] - NODE_H / 2)
    if len(pts) == 2 and shift:
        (x0, y0), (x1, y1) = pts
        pts.insert(1, ((x0 + x1) / 2 + shift * 3, (y0 + y1) / 2))
    d = f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        dy = (y1 - y0) / 2
        d += f" C{x0:.1f},{y0 + dy:.1f} {x1:.1f},{y1 - dy:.1f} {x1:.1f},{y1:.1f}"
    # the label sits halfway along the middle stretch between two ranks, never on a bend
    # point (a bend lies in a rank, beside its nodes)
    (ax, ay), (bx, by) = pts[(len(pts) - 2) // 2], pts[(len(pts) - 2) // 2 + 1]
    lx, ly = (ax + bx) / 2, (ay + by) / 2
    return d, lx, ly


def _arc(
    lay: _Layout, graph: Diagram, i: int, stack: int, placed: list[Box]
) -> tuple[str, float, float]:
    """A back edge (or a loop) as an arc on the right, out past the nodes of the ranks it
    spans and past the labels already placed there (a forward edge's long label sits between
    the same ranks); its label, on the arc's outermost point, clears every placed label."""
    e = graph.edges[i]
    lo, hi = sorted((lay.rank[e.source], lay.rank[e.target]))
    sx, sy = lay.x[e.source] + lay.width[e.source] / 2, lay.y(e.source)
    tx, ty = lay.x[e.target] + lay.width[e.target] / 2, lay.y(e.target)
    if e.source == e.target:
        sy, ty = sy + 6, ty - 6
        out = sx + 46
    else:
        top, bottom = lay.y_of_rank(lo) - NODE_H / 2, lay.y_of_rank(hi) + NODE_H / 2
        extent = max(lay.x[k] + lay.width[k] / 2 for k in lay.rank if lo <= lay.rank[k] <= hi)
        extent = max([extent, *(b[2] for b in placed if b[1] < bottom and b[3] > top)])
        out = extent + 40 + 56 * stack
    w, ly = _label_width(graph.label(i)), (sy + ty) / 2
    # the label is centred on the arc's middle, at x = (sx + tx) / 8 + 0.75 * out
    band = (ly - LABEL_H / 2 - LABEL_GAP, ly + LABEL_H / 2 + LABEL_GAP)
    clear = [b[2] for b in placed if b[1] < band[1] and b[3] > band[0]]
    if clear:
        out = max(out, (max(clear) + LABEL_GAP + w / 2 - (sx + tx) / 8) / 0.75)
    d = f"M{sx:.1f},{sy:.1f} C{out:.1f},{sy:.1f} {out:.1f},{ty:.1f} {tx:.1f},{ty:.1f}"
    return d, (sx + tx) / 8 + out * 0.75, ly


def _free(x: float, y: float, w: float, placed: list[Box]) -> tuple[float, float]:
    """The point nearest (``x``, ``y``) where a label of width ``w`` covers no node and no
    placed label: a little up or down in the gap between the ranks, or aside; else further
    down until clear (parallel edges' labels stack)."""
    step = LABEL_H + LABEL_GAP
    offsets = [
        (dx, dy)
        for dy in (0.0, step, -step, 2 * step, -2 * step)
        for dx in (
            0.0,
            w / 2 + LABEL_GAP,
            -(w / 2 + LABEL_GAP),
            w + 2 * LABEL_GAP,
            -(w + 2 * LABEL_GAP),
        )
    ]
    offsets.sort(key=lambda o: abs(o[0]) + 2 * abs(o[1]))  # moving up or down costs more
    for dx, dy in offsets:
        if not any(_overlaps(b, _box(x + dx, y + dy, w)) for b in placed):
            return x + dx, y + dy
    for _ in range(len(placed) + 1):
        hit = [b for b in placed if _overlaps(b, _box(x, y, w))]
        if not hit:
            break
        y = max(b[3] for b in hit) + LABEL_GAP + LABEL_H / 2
    return x, y


def _node(lay: _Layout, graph: Diagram, node: str) -> str:
    kind = "start" if node == START else "end" if node == END else "role"
    classes = ["node", kind]
    if node in graph.visited and node != graph.current:
        classes.append("visited")
    if node == graph.current:
        classes.append("current")
    x, y, w = lay.x[node], lay.y(node), lay.width[node]
    rx = NODE_H / 2 if kind != "role" else 7
    return (
        f'<g class="{" ".join(classes)}" data-node="{escape(node)}">'
        f'<rect x="{x - w / 2:.1f}" y="{y - NODE_H / 2:.1f}" width="{w:.1f}" '
        f'height="{NODE_H}" rx="{rx}"/>'
        f'<text x="{x:.1f}" y="{y + 4.5:.1f}">{escape(node)}</text></g>'
    )


def to_svg(graph: Diagram, ident: str = "g") -> str:
    """The graph as an ``<svg>`` element: nodes carry ``data-node`` and the classes
    ``start``/``end``/``role``, ``visited`` and ``current``; edges ``taken`` or ``next``."""
    lay = layout(graph)
    parts: list[str] = []
    pairs: dict[tuple[str, str], list[int]] = {}
    for i in lay.chains:
        e = graph.edges[i]
        pairs.setdefault((e.source, e.target), []).append(i)
    labels: dict[int, str] = {}
    bounds = [lay.x[k] + side * lay.width[k] / 2 for k in lay.rank for side in (-1, 1)]
    # what a label must not cover: the nodes, then the labels placed so far (forward edges'
    # first: the arcs route around them)
    placed: list[Box] = [
        _box(lay.x[n], lay.y(n), lay.width[n], NODE_H) for n in graph.nodes if n in lay.rank
    ]
    drawn: dict[int, str] = {}
    for i in lay.chains:
        e = graph.edges[i]
        group = pairs[(e.source, e.target)]
        shift = (group.index(i) - (len(group) - 1) / 2) * 16
        d, lx, ly = _forward(lay, graph, i, shift)
        w = _label_width(graph.label(i))
        lx, ly = _free(lx, ly, w, placed)
        drawn[i] = d
        placed.append(_box(lx, ly, w))
        labels[i] = _label(lx, ly, graph.label(i))
    arcs = [i for i in range(len(graph.edges)) if i not in lay.chains]
    for i in arcs:
        stack = lay.back.index(i) if i in lay.back else 0
        d, lx, ly = _arc(lay, graph, i, stack, placed)
        drawn[i] = d
        placed.append(_box(lx, ly, _label_width(graph.label(i))))
        labels[i] = _label(lx, ly, graph.label(i))
    for i, d in sorted(drawn.items()):
        cls = _edge_class(graph, i)
        marker = cls.split()[-1]
        e = graph.edges[i]
        parts.append(
            f'<g class="{cls}" data-edge="{escape(e.source)} {escape(e.status)}">'
            f'<path d="{d}" marker-end="url(#{ident}-{marker})"/></g>'
        )
    bounds += [edge for b in placed for edge in (b[0], b[2])]
    nodes = [_node(lay, graph, node) for node in graph.nodes]
    left, width = min(bounds) - MARGIN, max(bounds) - min(bounds) + 2 * MARGIN
    height = max([max(lay.y(k) for k in lay.rank) + NODE_H / 2, *(b[3] for b in placed)]) + MARGIN
    markers = "".join(
        f'<marker id="{ident}-{m}" class="arrow {m}" viewBox="0 0 10 10" refX="9" refY="5" '
        f'markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" '
        f'orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z"/></marker>'
        for m in ("edge", "taken", "next")
    )
    title = escape(f"routing graph of {graph.name}")
    return (
        f'<svg class="uwf-graph" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{title}" viewBox="{left:.0f} 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}"><defs>{markers}</defs>'
        f"{''.join(parts)}{''.join(nodes)}{''.join(labels[i] for i in sorted(labels))}</svg>"
    )
