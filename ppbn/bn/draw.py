"""A picture of a network: a PNG of its DAG, nodes coloured by owner, edges marked
against a reference network (matplotlib, Agg, no pyplot state).

The layout is ``ppbn.bn.layout.layered_layout`` (rows top to bottom, deterministic);
units are inches, so label boxes fit their text at any network size. Arrows are clipped
at the boxes, so every head shows.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ppbn.bn.layout import layered_layout
from ppbn.bn.model import structure_diff
from ppbn.bn.schema import party_label

OWNER_COLOURS = {"alice": "#9ecae1", "bob": "#b8e2a8"}
OTHER_COLOURS = ("#f2c4de", "#fde0a6", "#d9d2e9")
UNKNOWN_COLOUR = "#e0e0e0"
# mark -> (colour, line style, legend text)
EDGE_STYLES = {
    "same": ("#303030", "solid", "in both"),
    "extra": ("#d62728", "solid", "extra in learned"),
    "reversed": ("#ff7f0e", "solid", "reversed in learned"),
    "missing": ("#9a9a9a", "dashed", "missing from learned"),
}
FONT_SIZE = 9
DPI = 120
BOX_HEIGHT = 0.32  # inches
BOX_PAD = 0.18  # inches of box on either side of the label
GAP = 0.3  # inches between boxes in a row
ROW_STEP = 0.95  # inches between rows
MAX_ROW_WIDTH = 16.0  # a wider layer is split into staggered rows
MARGIN = 0.4
BEND_SLACK = 0.3  # room beside a bend point for the curve through it
TOP = 0.75  # room for the title
BOTTOM = 0.6  # room for the legend

Edge = tuple[str, str]
Point = tuple[float, float]


def edge_marks(
    edges: Sequence[Edge], reference_edges: Sequence[Edge] | None
) -> dict[str, list[Edge]]:
    """Each learned edge as same / extra / reversed, and the reference's missing edges
    (``structure_diff``); without a reference every edge is "same"."""
    learned = [tuple(e) for e in edges]
    if reference_edges is None:
        return {"same": learned, "extra": [], "reversed": [], "missing": []}
    diff = structure_diff(_parents(learned), _parents([tuple(e) for e in reference_edges]))
    extra = {tuple(e) for e in diff["extra_links"]}
    flipped = {tuple(e) for e in diff["reversed_links"]}
    return {
        "same": [e for e in learned if e not in extra and e not in flipped],
        "extra": [e for e in learned if e in extra],
        "reversed": [e for e in learned if e in flipped],
        "missing": [tuple(e) for e in diff["missing_links"]],
    }


def _parents(edges: Sequence[Edge]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for p, c in edges:
        parents.setdefault(c, []).append(p)
    return parents


def owner_colours(owners: Mapping[str, str] | None) -> dict[str, str]:
    """A colour per party: alice and bob fixed, any other in name order."""
    parties = sorted(set((owners or {}).values()) - set(OWNER_COLOURS))
    extra = {p: OTHER_COLOURS[i % len(OTHER_COLOURS)] for i, p in enumerate(parties)}
    return {**OWNER_COLOURS, **extra}


def owner_labels(
    owners: Mapping[str, str] | None, party_names: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(party, legend text) for each owner, alice and bob first: the display name with the
    role (``"Acme Insurance (alice)"``) where ``party_names`` gives one, else the role."""
    parties = sorted(set((owners or {}).values()), key=lambda p: (p not in OWNER_COLOURS, p))
    return [(p, party_label(p, party_names)) for p in parties]


def _acyclic(edges: Sequence[Edge], more: Sequence[Edge]) -> list[Edge]:
    """``edges`` and each of ``more`` that closes no cycle with those kept before it."""
    children: dict[str, set[str]] = {}
    for p, c in edges:
        children.setdefault(p, set()).add(c)
    kept = list(edges)
    for p, c in more:
        seen, todo = set(), [c]
        while todo:  # does c reach p?
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += children.get(node, ())
        if p not in seen:
            kept.append((p, c))
            children.setdefault(p, set()).add(c)
    return kept


def _label_widths(variables: Sequence[str]) -> dict[str, float]:
    """Each label's box width in inches, measured with the Agg renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    out = {}
    for v in variables:
        text = fig.text(0, 0, v, fontsize=FONT_SIZE)
        out[v] = text.get_window_extent(renderer).width / DPI + 2 * BOX_PAD
        text.remove()
    return out


def draw_network(
    variables: Sequence[str],
    edges: Sequence[Edge],
    owners: Mapping[str, str] | None = None,
    reference_edges: Sequence[Edge] | None = None,
    title: str | None = None,
    party_names: Mapping[str, str] | None = None,
) -> tuple[bytes, dict[str, list[Edge]]]:
    """The network as PNG bytes (the caller writes them, whole or not at all) and the
    edge marks (``edge_marks``); the legend names the owners by ``party_names`` (role ->
    display name) where given. ValueError when an edge names an unknown variable or the
    edges have a cycle."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    variables = list(variables)
    if not variables:
        raise ValueError("the network has no variables")
    edges = [(str(p), str(c)) for p, c in edges]
    known = set(variables)
    for p, c in [*edges, *(reference_edges or [])]:
        if p not in known or c not in known:
            raise ValueError(f"edge {p} -> {c} names a variable the network does not have")
    marks = edge_marks(edges, reference_edges)
    width = _label_widths(variables)
    placed = _acyclic(edges, marks["missing"])  # missing edges placed too where they fit
    layout = layered_layout(variables, placed, width, GAP, ROW_STEP, MAX_ROW_WIDTH)
    bends = [x + BEND_SLACK for route in layout.bends.values() for x, _ in route]
    content = max([x + width[v] / 2 for v, (x, _) in layout.pos.items()] + bends, default=0.0)
    handles = _legend_handles(variables, marks, owners, party_names, reference_edges is not None)
    fig_w = max(content + 2 * MARGIN, 5.0)
    legend_rows = 1 if _legend_width(handles) <= fig_w - 0.3 else 2
    fig_w = max(fig_w, _legend_width(handles) / legend_rows + 0.3)
    bottom = 0.3 + 0.3 * legend_rows if handles else 0.2
    fig_h = TOP + bottom + max(layout.rows - 1, 0) * ROW_STEP + BOX_HEIGHT + 2 * MARGIN
    shift, top = (fig_w - content) / 2, fig_h - TOP - MARGIN - BOX_HEIGHT / 2

    def place(point: tuple[float, float]) -> tuple[float, float]:
        return point[0] + shift, top - point[1]

    xy = {v: place(point) for v, point in layout.pos.items()}
    fig = Figure(figsize=(fig_w, fig_h), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, fig_w)
    ax.set_ylim(0, fig_h)
    ax.set_axis_off()
    boxes = _draw_nodes(ax, variables, xy, width, owners)
    for mark in ("missing", "same", "reversed", "extra"):
        for p, c in marks[mark]:
            if (p, c) not in layout.bends:  # a missing edge against the learned order
                _draw_arc(ax, xy, boxes, p, c)
                continue
            route = [xy[p], *map(place, layout.bends[(p, c)]), xy[c]]
            _draw_route(ax, route, width[p], width[c], mark)
    heading = [title] if title else []
    if reference_edges is not None:
        counts = {k: len(v) for k, v in marks.items()}
        shd = counts["extra"] + counts["missing"] + counts["reversed"]
        heading.append(
            f"SHD {shd}: {counts['extra']} extra, {counts['missing']} missing, "
            f"{counts['reversed']} reversed; {counts['same']} edges as in the reference"
        )
    if heading:
        ax.text(fig_w / 2, fig_h - 0.12, "\n".join(heading), ha="center", va="top", fontsize=11)
    if handles:
        ncol = math.ceil(len(handles) / legend_rows)
        ax.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False, fontsize=FONT_SIZE)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, metadata={"Software": None})
    return png.getvalue(), marks


def _draw_nodes(
    ax: Any,
    variables: Sequence[str],
    xy: Mapping[str, tuple[float, float]],
    width: Mapping[str, float],
    owners: Mapping[str, str] | None,
) -> dict[str, Any]:
    from matplotlib.patches import FancyBboxPatch

    colours = owner_colours(owners)
    boxes = {}
    for v in variables:
        x, y = xy[v]
        owner = (owners or {}).get(v)
        box = FancyBboxPatch(
            (x - width[v] / 2, y - BOX_HEIGHT / 2),
            width[v],
            BOX_HEIGHT,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=colours.get(owner, UNKNOWN_COLOUR) if owner else UNKNOWN_COLOUR,
            edgecolor="#404040",
            linewidth=0.8,
            zorder=3,
        )
        ax.add_patch(box)
        ax.text(x, y, v, ha="center", va="center", fontsize=FONT_SIZE, zorder=4)
        boxes[v] = box
    return boxes


def _clip(centre: Point, half_width: float, toward: Point) -> Point:
    """Where the line from a box's ``centre`` to ``toward`` leaves the box (plus a hair)."""
    dx, dy = toward[0] - centre[0], toward[1] - centre[1]
    if dx == dy == 0:
        return centre
    limits = [
        half_width / abs(dx) if dx else math.inf,
        BOX_HEIGHT / 2 / abs(dy) if dy else math.inf,
    ]
    t = min(limits) + 0.03 / math.hypot(dx, dy)
    return centre[0] + t * dx, centre[1] + t * dy


def _smooth(points: Sequence[Point]) -> Any:
    """A Catmull-Rom curve through ``points`` as cubic Bezier segments."""
    from matplotlib.path import Path as MplPath

    padded = [points[0], *points, points[-1]]
    verts, codes = [points[0]], [MplPath.MOVETO]
    for i in range(1, len(padded) - 2):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = padded[i - 1 : i + 3]
        verts += [
            (x1 + (x2 - x0) / 6, y1 + (y2 - y0) / 6),
            (x2 - (x3 - x1) / 6, y2 - (y3 - y1) / 6),
        ]
        verts.append((x2, y2))
        codes += [MplPath.CURVE4] * 3
    return MplPath(verts, codes)


def _draw_route(ax: Any, route: list[Point], width_from: float, width_to: float, mark: str) -> None:
    """A learned edge along its route (its bend points), clipped at both boxes."""
    from matplotlib.patches import FancyArrowPatch

    colour, style, _ = EDGE_STYLES[mark]
    route = list(route)
    route[0] = _clip(route[0], width_from / 2, route[1])
    route[-1] = _clip(route[-1], width_to / 2, route[-2])
    ax.add_patch(
        FancyArrowPatch(
            path=_smooth(route),
            arrowstyle="-|>",
            mutation_scale=11,
            color=colour,
            linestyle=style,
            linewidth=1.6 if mark in ("extra", "reversed") else 1.1,
            zorder=1 if mark == "missing" else 2,
        )
    )


def _draw_arc(ax: Any, xy: Mapping[str, Point], boxes: Mapping[str, Any], p: str, c: str) -> None:
    """A reference edge the learned network lacks: a dashed arc, clipped at both boxes."""
    from matplotlib.patches import FancyArrowPatch

    colour, style, _ = EDGE_STYLES["missing"]
    rad = 0.2 if xy[c][0] >= xy[p][0] else -0.2
    ax.add_patch(
        FancyArrowPatch(
            xy[p],
            xy[c],
            patchA=boxes[p],
            patchB=boxes[c],
            arrowstyle="-|>",
            mutation_scale=11,
            connectionstyle=f"arc3,rad={rad}",
            color=colour,
            linestyle=style,
            linewidth=1.1,
            shrinkA=1,
            shrinkB=1,
            zorder=1,
        )
    )


def _legend_handles(
    variables: Sequence[str],
    marks: Mapping[str, list[Edge]],
    owners: Mapping[str, str] | None,
    party_names: Mapping[str, str] | None,
    compared: bool,
) -> list[Any]:
    """The owners' colours, and with a reference each kind of edge with its count."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    colours = owner_colours(owners)
    handles: list[Any] = [
        Patch(facecolor=colours[p], edgecolor="#404040", label=label)
        for p, label in owner_labels(owners, party_names)
    ]
    if owners is not None and any(v not in owners for v in variables):
        handles.append(Patch(facecolor=UNKNOWN_COLOUR, edgecolor="#404040", label="owner unknown"))
    if compared:
        for mark in ("same", "extra", "reversed", "missing"):
            colour, style, text = EDGE_STYLES[mark]
            label = f"{text} ({len(marks[mark])})"
            handles.append(Line2D([], [], color=colour, linestyle=style, lw=1.6, label=label))
    return handles


def _legend_width(handles: Sequence[Any]) -> float:
    """About how many inches the legend takes in one row."""
    return sum(0.75 + 0.075 * len(h.get_label()) for h in handles)
