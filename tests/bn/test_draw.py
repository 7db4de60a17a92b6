"""The picture of a network: a PNG that is not blank, owners in their colours, edges marked
against a reference, a layout that keeps boxes apart, the same bytes every time."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from ppbn.bn.draw import EDGE_STYLES, OWNER_COLOURS, draw_network, edge_marks
from ppbn.bn.layout import isotonic, layered_layout

ASIA = ("asia", "smoke", "tub", "lung", "bronc", "either", "xray", "dysp")
ASIA_EDGES = [
    ("asia", "tub"),
    ("smoke", "lung"),
    ("smoke", "bronc"),
    ("tub", "either"),
    ("lung", "either"),
    ("either", "xray"),
    ("either", "dysp"),
    ("bronc", "dysp"),
]
OWNERS = {v: ("alice", "bob")[i % 2] for i, v in enumerate(ASIA)}


def draw(path, *args, **kwargs):
    """draw_network's picture written to ``path``; its edge marks."""
    picture, marks = draw_network(*args, **kwargs)
    path.write_bytes(picture)
    return marks


def _pixels_of(image: np.ndarray, colour: str) -> int:
    want = np.array(to_rgb(colour))
    return int((np.abs(image[:, :, :3] - want).max(axis=2) < 0.02).sum())


def test_the_png_is_not_blank_and_colours_each_owner(tmp_path):
    png = tmp_path / "asia.png"
    draw(png, ASIA, ASIA_EDGES, OWNERS, title="asia")
    assert 10_000 < png.stat().st_size < 1_000_000
    image = imread(png)
    assert 300 < image.shape[0] < 3000 and 300 < image.shape[1] < 3000
    assert (image[:, :, :3] < 0.5).any()  # text and arrows, not a blank page
    assert OWNER_COLOURS["alice"] != OWNER_COLOURS["bob"]
    assert _pixels_of(image, OWNER_COLOURS["alice"]) > 1000
    assert _pixels_of(image, OWNER_COLOURS["bob"]) > 1000


def test_extra_missing_and_reversed_edges_are_counted_and_drawn(tmp_path):
    reference = [("a", "b"), ("b", "c"), ("c", "d")]
    learned = [("b", "a"), ("b", "c"), ("a", "d")]  # a-b reversed, a->d extra, c->d missing
    marks = edge_marks(learned, reference)
    assert marks == {
        "same": [("b", "c")],
        "extra": [("a", "d")],
        "reversed": [("b", "a")],
        "missing": [("c", "d")],
    }
    png = tmp_path / "diff.png"
    assert draw(png, "abcd", learned, reference_edges=reference) == marks
    image = imread(png)
    for mark in ("extra", "reversed"):
        assert _pixels_of(image, EDGE_STYLES[mark][0]) > 20, mark
    assert edge_marks(learned, None)["same"] == learned


def test_the_same_input_gives_the_same_bytes(tmp_path):
    first, second = tmp_path / "1.png", tmp_path / "2.png"
    draw(first, ASIA, ASIA_EDGES, OWNERS, ASIA_EDGES[1:])
    draw(second, ASIA, ASIA_EDGES, OWNERS, ASIA_EDGES[1:])
    assert first.read_bytes() == second.read_bytes()


def test_boxes_in_a_row_never_overlap_and_a_wide_layer_is_split():
    names = [f"ROOT_VARIABLE_{i:02d}" for i in range(30)] + ["child"]
    edges = [(n, "child") for n in names[:-1]]
    widths = {n: 1.5 for n in names}
    layout = layered_layout(names, edges, widths, gap=0.3, row_step=1.0, max_width=16.0)
    assert layout.rows > 2  # 30 roots of 1.8 inches: split into staggered rows
    rows: dict[float, list[float]] = {}
    for x, y in layout.pos.values():
        rows.setdefault(y, []).append(x)
    for xs in rows.values():
        xs.sort()
        assert all(b - a >= 1.5 + 0.3 - 1e-9 for a, b in zip(xs, xs[1:], strict=False))
    assert layout.pos["child"][1] == max(y for _, y in layout.pos.values())


def test_a_long_edge_bends_beside_the_rows_between():
    edges = [("a", "b"), ("b", "c"), ("a", "c")]
    layout = layered_layout("abc", edges, dict.fromkeys("abc", 1.0), 0.3, 1.0, 16.0)
    assert len(layout.bends[("a", "c")]) == 1 and layout.bends[("a", "b")] == []
    (bx, _), (x, _) = layout.bends[("a", "c")][0], layout.pos["b"]
    assert abs(bx - x) >= 0.5  # beside b's box, not under it


def test_bad_edges_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="cycle"):
        draw(tmp_path / "x.png", "ab", [("a", "b"), ("b", "a")])
    with pytest.raises(ValueError, match="z -> a names a variable"):
        draw(tmp_path / "x.png", "ab", [("a", "b")], reference_edges=[("z", "a")])


def test_isotonic_pools_violations():
    assert isotonic([1.0, 3.0, 2.0, 4.0], [1.0] * 4) == [1.0, 2.5, 2.5, 4.0]
    assert isotonic([3.0, 0.0], [3.0, 1.0]) == [2.25, 2.25]
