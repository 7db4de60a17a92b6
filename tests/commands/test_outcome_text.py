"""What `ppbn learn` and `ppbn simulate` print of a result: the learned network in full."""

from __future__ import annotations

from ppbn.commands.outcomes import result_text


def test_the_edges_and_parents_of_a_large_network_are_never_cut():
    edges = [[f"parent_{i}", f"child_{i}"] for i in range(60)]
    text = result_text("edges", edges)
    assert "..." not in text and text.count("->") == 60 and text.endswith("parent_59 -> child_59")
    parents = {f"v{i}": [f"p{i}", f"q{i}"] for i in range(40)} | {"root": []}
    shown = result_text("parents", parents)
    assert "v39: p39, q39" in shown and shown.endswith("root: -")


def test_other_long_values_stay_short():
    assert result_text("notes", "x" * 300) == "x" * 97 + "..."
    assert result_text("edges", []) == "(none)"


def test_a_privacy_object_reads_as_one_line():
    from ppbn.dp.accounting import plan

    cards = [2, 3, 4, 3, 2, 4, 3] * 5 + [2, 2]
    p = plan(1.0, n_records=20000, cardinalities=cards, max_parents=2, mode="exact", score_frac=49)
    text = result_text("privacy", p.as_dict())
    assert text.startswith("(1, 9.0e-10)-DP (zcdp accounting): 71 noisy parent choices")
    assert f"scale {p.count_scale:.3g}" in text and "\n" not in text


def test_the_adaptive_release_names_both_noise_scales():
    from ppbn.dp.accounting import plan

    p = plan(
        1.0,
        n_records=10000,
        cardinalities=[2, 3, 2, 2, 3],
        max_parents=1,
        mode="bic",
        score_frac=0,
        release="adaptive",
    )
    text = result_text("privacy", p.as_dict())
    assert "noisy pair choices" in text and f"scale {p.count_scale:.3g}" in text
    assert f"({p.one_way_scale:.3g} on the 1-way tables)" in text
