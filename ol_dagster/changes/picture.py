"""The picture of a batch's lineage changes: an SVG drawing, and the Markdown to show it in Dagster.

A reader of a ``catalog_upload`` materialization sees at a glance which jobs and datasets a batch
added (green), removed (red, dashed), changed (amber), and the unchanged ones around them (grey),
drawn left to right as data flows. At most ``MAX_CHANGED`` changed objects and ``MAX_CONTEXT``
unchanged neighbours are drawn (50 and 25: still readable in Dagster's Markdown dialog); the rest
are counted in a line under the drawing ("+120 more not drawn: 80 added, 40 removed").

Why no drawing library: the layout is what matters, and the maintained pure-Python choices don't
lay out a lineage graph. Graphviz (``dot``) lays it out best, but its Python packages only call the
``dot`` binary, which a plain ``pip install`` does not bring. drawsvg and svgwrite (maintained)
only write SVG elements, which is a few lines of text here; networkx's ``multipartite_layout``
places layers but orders nothing inside them and brings numpy; grandalf (a Sugiyama layout) has
had no release since 2023. So this module lays the graph out itself with the classic layered
method, small because the graph is: a layer per longest path from a source (cycles broken at the
back edges a depth-first walk meets), an order inside each layer by a few barycentre sweeps, tall
layers folded into several columns, then edges as curves between the columns.

Why an embedded SVG: Dagster's UI renders Markdown metadata with react-markdown and
rehype-sanitize, and its sanitize schema adds ``data`` to the protocols allowed in an image's
``src`` (dagster-io/dagster ``js_modules/.../ui-core/src/ui/MarkdownWithPlugins.tsx``), while raw
HTML is shown as text. So a Markdown image with a ``data:image/svg+xml;base64,...`` address shows
in the UI, with nothing to serve beside it; an SVG shown as an image runs no script and loads
nothing, and every label from a producer is escaped all the same.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

MAX_CHANGED = 50  # changed objects drawn; more are counted under the drawing
MAX_CONTEXT = 25  # unchanged neighbours drawn around them
ROWS_PER_COLUMN = 15  # a taller layer is folded into several columns

STATES: tuple[str, ...] = ("added", "removed", "changed", "context")
KINDS: tuple[str, ...] = ("job", "dataset")
# stroke, fill, text: GitHub's diff colours, readable on Dagster's light and dark dialogs
_COLOURS = {
    "added": ("#1a7f37", "#dafbe1", "#0f5323"),
    "removed": ("#cf222e", "#ffebe9", "#82071e"),
    "changed": ("#9a6700", "#fff8c5", "#633c01"),
    "context": ("#8c959f", "#f6f8fa", "#424a53"),
}
_ORDER = {state: i for i, state in enumerate(STATES)}

_NODE_W, _NODE_H = 200, 30
_COL_GAP, _ROW_GAP = 56, 12
_MARGIN, _TOP = 16, 44  # the legend sits above the drawing
_CHARS = 25  # label characters that fit a node (DejaVu Sans, 12 px: about 7.4 px each)


@dataclass(frozen=True, slots=True)
class _Node:
    id: str
    label: str
    kind: str
    state: str


@dataclass(frozen=True, slots=True)
class _Placed:
    node: _Node
    x: float
    y: float


def render_svg(nodes: Iterable[Sequence[str]], edges: Iterable[Sequence[str]]) -> str:
    """The drawing of ``(id, label, kind, state)`` nodes and ``(src, dst, state)`` edges, as SVG.

    ``kind`` is ``job`` or ``dataset``; ``state`` is ``added``, ``removed``, ``changed`` or
    ``context``. Edges to a node not given (or not drawn) are left out.
    """
    every = _nodes(nodes)
    links = [(str(s), str(d), _state(st, f"lineage edge {s!r} -> {d!r}")) for s, d, st in edges]
    drawn = _select(every, links)
    shown = [(s, d, st) for s, d, st in links if s in drawn and d in drawn and s != d]
    placed, width, height = _place(drawn, shown)
    summary = _summary(every.values(), drawn)
    height += 24 if summary else 0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans, Arial, sans-serif" '
        'font-size="12">',
        _style(),
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        *_legend(),
    ]
    if not drawn:
        parts.append(f'<text x="{_MARGIN}" y="{_TOP + 20}">No lineage changes.</text>')
    parts.extend(_edge(placed[s], placed[d], st) for s, d, st in shown)
    parts.extend(_box(p) for p in placed.values())
    if summary:
        parts.append(
            f'<text x="{_MARGIN}" y="{height - 10:.0f}" class="summary">{escape(summary)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def picture_markdown(nodes: Iterable[Sequence[str]], edges: Iterable[Sequence[str]]) -> str:
    """Markdown that shows the drawing in Dagster's UI: an image with the SVG in its address."""
    nodes = list(nodes)
    svg = render_svg(nodes, edges)
    counts = _counts(_nodes(nodes).values())
    alt = ", ".join(f"{counts[s]} {s}" for s in STATES[:3] if counts[s]) or "no changes"
    encoded = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f"![Lineage changes: {alt}](data:image/svg+xml;base64,{encoded})"


def _state(value: str, of: str) -> str:
    state = str(value)
    if state not in _ORDER:
        raise ValueError(f"{of}: state {state!r}, expected one of {', '.join(STATES)}")
    return state


def _nodes(nodes: Iterable[Sequence[str]]) -> dict[str, _Node]:
    out: dict[str, _Node] = {}
    for node_id, label, kind, state in nodes:
        if kind not in KINDS:
            raise ValueError(f"lineage node {node_id!r}: kind {kind!r}, expected job or dataset")
        node = f"lineage node {node_id!r}"
        out[str(node_id)] = _Node(str(node_id), str(label), str(kind), _state(state, node))
    return out


def _rank(node: _Node) -> tuple[int, str, str]:
    return (_ORDER[node.state], node.kind, node.label)


def _select(every: dict[str, _Node], links: list[tuple[str, str, str]]) -> dict[str, _Node]:
    """The changed objects to draw, whole neighbourhoods first, then the unchanged around them.

    Changed objects are taken a connected group at a time (from the first by state, kind and
    label, then its changed neighbours), so a cut at ``MAX_CHANGED`` leaves whole stories rather
    than scattered boxes.
    """
    near: dict[str, list[str]] = {}
    for src, dst, _ in links:
        if src in every and dst in every:
            near.setdefault(src, []).append(dst)
            near.setdefault(dst, []).append(src)
    drawn: dict[str, _Node] = {}
    for seed in sorted((n for n in every.values() if n.state != "context"), key=_rank):
        queue = [seed.id]
        while queue and len(drawn) < MAX_CHANGED:
            node = every[queue.pop(0)]
            if node.id in drawn or node.state == "context":
                continue
            drawn[node.id] = node
            queue.extend(sorted(near.get(node.id, ()), key=lambda i: _rank(every[i])))
    touching: dict[str, int] = {}
    for node_id in drawn:
        for other in near.get(node_id, ()):
            if every[other].state == "context":
                touching[other] = touching.get(other, 0) + 1
    context = sorted(touching, key=lambda i: (-touching[i], every[i].label))[:MAX_CONTEXT]
    drawn.update((i, every[i]) for i in sorted(context, key=lambda i: _rank(every[i])))
    return drawn


def _layers(drawn: dict[str, _Node], links: list[tuple[str, str, str]]) -> list[list[str]]:
    """Each node's layer: its longest path from a source, back edges of cycles left out."""
    succ: dict[str, list[str]] = {i: [] for i in drawn}
    for src, dst, _ in links:
        succ[src].append(dst)
    on_path: set[str] = set()
    done: set[str] = set()
    forward: dict[str, list[str]] = {i: [] for i in drawn}
    for root in drawn:  # iterative depth-first walk: a long chain must not hit recursion limits
        if root in done:
            continue
        stack = [(root, iter(succ[root]))]
        on_path.add(root)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
            elif child not in on_path:
                forward[node].append(child)
                if child not in done:
                    on_path.add(child)
                    stack.append((child, iter(succ[child])))
    indegree = {i: 0 for i in drawn}
    for targets in forward.values():
        for t in targets:
            indegree[t] += 1
    layer = dict.fromkeys(drawn, 0)
    ready = [i for i in drawn if indegree[i] == 0]
    while ready:
        node = ready.pop()
        for t in forward[node]:
            layer[t] = max(layer[t], layer[node] + 1)
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    has_pred = {t for targets in forward.values() for t in targets}
    for node in drawn:  # a source sits just before its first reader, not far left of it
        if node not in has_pred and forward[node]:
            layer[node] = min(layer[t] for t in forward[node]) - 1
    out: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for node_id in drawn:  # drawn is in selection order: the first sweep starts from it
        out[layer[node_id]].append(node_id)
    return out


def _order(layers: list[list[str]], links: list[tuple[str, str, str]]) -> None:
    """Fewer crossings: each layer sorted by its neighbours' mean position, down then up, twice."""
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for src, dst, _ in links:
        succs.setdefault(src, []).append(dst)
        preds.setdefault(dst, []).append(src)
    for _ in range(2):
        for sweep, near in (
            (range(1, len(layers)), preds),
            (range(len(layers) - 2, -1, -1), succs),
        ):
            for i in sweep:
                pos = {n: k / max(len(layer), 1) for layer in layers for k, n in enumerate(layer)}
                current = {n: k / max(len(layers[i]), 1) for k, n in enumerate(layers[i])}

                def centre(n: str, pos=pos, current=current, near=near) -> float:
                    around = [pos[m] for m in near.get(n, ()) if m in pos]
                    return sum(around) / len(around) if around else current[n]

                layers[i].sort(key=centre)


def _place(
    drawn: dict[str, _Node], links: list[tuple[str, str, str]]
) -> tuple[dict[str, _Placed], float, float]:
    layers = _layers(drawn, links)
    _order(layers, links)
    placed: dict[str, _Placed] = {}
    tallest = max((min(len(layer), ROWS_PER_COLUMN) for layer in layers), default=0)
    full = tallest * (_NODE_H + _ROW_GAP)
    column = 0
    for layer in layers:
        folds = -(-len(layer) // ROWS_PER_COLUMN)
        rows = -(-len(layer) // folds)
        for k, node_id in enumerate(layer):
            fold, row = divmod(k, rows)
            in_fold = min(rows, len(layer) - fold * rows)
            top = _TOP + (full - in_fold * (_NODE_H + _ROW_GAP)) / 2
            x = _MARGIN + (column + fold) * (_NODE_W + _COL_GAP)
            placed[node_id] = _Placed(drawn[node_id], x, top + row * (_NODE_H + _ROW_GAP))
        column += folds
    width = max(_MARGIN * 2 + column * (_NODE_W + _COL_GAP) - _COL_GAP, 560)
    return placed, width, _TOP + full + _MARGIN


def _style() -> str:
    rules = [".summary{fill:#424a53}", ".kind{font-size:9px;letter-spacing:.5px}"]
    for state, (stroke, fill, text) in _COLOURS.items():
        dash = "stroke-dasharray:5 3;" if state == "removed" else ""
        rules.append(f".n-{state} .shape{{fill:{fill};stroke:{stroke};stroke-width:1.5;{dash}}}")
        rules.append(f".n-{state} text{{fill:{text}}}")
        rules.append(f".e-{state}{{fill:none;stroke:{stroke};stroke-width:1.4;{dash}}}")
    rules.append(".n-removed .label{text-decoration:line-through}")  # not by colour alone
    markers = "".join(
        f'<marker id="a-{state}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        f'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{stroke}"/></marker>'
        for state, (stroke, _, _) in _COLOURS.items()
    )
    return f"<defs><style>{''.join(rules)}</style>{markers}</defs>"


def _legend() -> list[str]:
    out = []
    x = _MARGIN
    for state in STATES:
        label = "unchanged" if state == "context" else state
        out.append(
            f'<g class="n-{state}"><rect class="shape" x="{x}" y="12" width="14" height="14" '
            f'rx="3"/><text x="{x + 20}" y="23">{label}</text></g>'
        )
        x += 30 + 7 * len(label)
    x += 10
    out.append(
        f'<g class="n-context"><rect class="shape" x="{x}" y="12" width="22" height="14"/>'
        f'<text x="{x + 28}" y="23">job</text>'
        f'<rect class="shape" x="{x + 60}" y="12" width="22" height="14" rx="7"/>'
        f'<text x="{x + 88}" y="23">dataset</text></g>'
    )
    return out


def _short(label: str) -> str:
    """The label as it fits a node: the end of a long name kept (``...s.public.orders``)."""
    return label if len(label) <= _CHARS else "…" + label[-(_CHARS - 1) :]


def _box(placed: _Placed) -> str:
    node, x, y = placed.node, placed.x, placed.y
    radius = _NODE_H / 2 if node.kind == "dataset" else 3
    return (
        f'<g class="n-{node.state}"><title>{escape(f"{node.kind} {node.label} ({node.state})")}'
        f'</title><rect class="shape" x="{x:.0f}" y="{y:.0f}" width="{_NODE_W}" '
        f'height="{_NODE_H}" rx="{radius:.0f}"/>'
        f'<text class="kind" x="{x + 12:.0f}" y="{y + 11:.0f}">{node.kind.upper()}</text>'
        f'<text class="label" x="{x + 12:.0f}" y="{y + 24:.0f}">{escape(_short(node.label))}</text>'
        "</g>"
    )


def _edge(src: _Placed, dst: _Placed, state: str) -> str:
    x1, y1 = src.x + _NODE_W, src.y + _NODE_H / 2
    x2, y2 = dst.x, dst.y + _NODE_H / 2
    bend = max(abs(x2 - x1) / 2, 40)
    path = (
        f"M{x1:.0f},{y1:.0f} C{x1 + bend:.0f},{y1:.0f} {x2 - bend:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
    )
    return (
        f'<path class={quoteattr("e-" + state)} d={quoteattr(path)} marker-end="url(#a-{state})"/>'
    )


def _counts(nodes: Iterable[_Node]) -> dict[str, int]:
    counts = dict.fromkeys(STATES, 0)
    for node in nodes:
        counts[node.state] += 1
    return counts


def _summary(every: Iterable[_Node], drawn: dict[str, _Node]) -> str:
    """The line under the drawing: what was not drawn, by state; empty when all was."""
    left = _counts(n for n in every if n.id not in drawn)
    if not any(left[s] for s in STATES[:3]):
        return ""
    parts = ", ".join(f"{left[s]} {s}" for s in STATES[:3] if left[s])
    return f"+{sum(left[s] for s in STATES[:3])} more not drawn: {parts}"
