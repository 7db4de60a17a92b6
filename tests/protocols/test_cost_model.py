"""The cost model of a secure term (``protocols.learning.cost``) against the bytes the
channel counts in ``ppbn bench ln``, message kind by message kind."""

from __future__ import annotations

import json

from ppbn.cli import main
from ppbn.protocols.learning.cost import (
    CountingBackend,
    Product,
    correction_bytes,
    lift_bytes,
    term_cost,
)


def test_every_modelled_kind_matches_the_measured_bytes(capsys) -> None:
    assert (
        main(["bench", "ln", "--count", "400", "--modes", "yw,exact,bdeu", "--format", "json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    modelled = [
        row
        for row in report["bytes_by_mode_and_kind"]
        if row["model_bytes_per_evaluation"] is not None
    ]
    assert {row["kind"] for row in modelled} >= {
        "yao.tables",
        "arith.ole.y",
        "arith.ole.r",
        "arith.reshare",
        "arith.bits.y",
        "arith.bits.r",
        "arith.wrap",
        "arith.wrap.d",
        "ot.ext.u",
        "arith.lookup",
    }
    for row in modelled:  # framing (a tag and a size per message) is all the model leaves out
        assert (
            abs(row["bytes_per_evaluation"] - row["model_bytes_per_evaluation"])
            <= 0.002 * row["bytes_per_evaluation"] + 1
        ), row
    for mode in report["modes"]:
        # the rest is one-time set-up (base OTs and GGM trees of three OT extensions: Yao's,
        # the arithmetic's and its reverse, ~37 KB each), spread over 400 terms
        assert 0 <= mode["bytes_per_evaluation"] - mode["model_bytes_per_evaluation"] <= 300, mode
        # each party's process reports the CPU it spent on the terms
        assert mode["alice_cpu_seconds"] > 0 and mode["bob_cpu_seconds"] > 0, mode


def test_the_model_follows_softspoken_k(capsys) -> None:
    """At k = 4 the receiver's u message is 4 bytes per OT (2 at k = 8); the model says so
    and the channel counts it."""
    assert (
        main(
            ["bench", "ln", "--count", "200", "--modes", "exact", "--ot-k", "4", "--format", "json"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    (u,) = [
        row
        for row in report["bytes_by_mode_and_kind"]
        if row["kind"] == "ot.ext.u" and "shares" in row["phase"]
    ]
    assert abs(u["bytes_per_evaluation"] - u["model_bytes_per_evaluation"]) <= 2, u  # framing
    k8, k4 = term_cost(15, "exact"), term_cost(15, "exact", ot_k=4)
    assert k4.ots == k8.ots
    assert k4.total - k8.total == 2 * k8.ots  # two more bytes of u per OT, nothing else


def test_threads_report_each_partys_cpu_too(capsys) -> None:
    assert (
        main(
            [
                "bench",
                "ln",
                "--count",
                "100",
                "--modes",
                "yw",
                "--parties",
                "threads",
                "--format",
                "json",
            ]
        )
        == 0
    )
    (mode,) = json.loads(capsys.readouterr().out)["modes"]
    assert (
        mode["evaluations"] == 100 and mode["alice_cpu_seconds"] > 0 and mode["bob_cpu_seconds"] > 0
    )


def test_model_counts_what_the_term_arithmetic_multiplies() -> None:
    yw, exact = term_cost(15, "yw"), term_cost(15, "exact")
    assert yw.and_gates < exact.and_gates and yw.ots < exact.ots and yw.total < exact.total
    # a Gilboa OLE of a w-bit input in Z_2^L: OT i keeps ceil((L - i) / 8) correction bytes
    assert correction_bytes(1, 128) == 16
    assert correction_bytes(9, 128) == 8 * 16 + 15
    assert correction_bytes(9, 70) == 6 * 9 + 3 * 8  # 70..65 bits, then 64..62
    be = CountingBackend()
    be.mul("x", "y", 48, 80, (20, 30))  # truncated: the ring of 80 + 3 bits, lifted from 83 - 48
    be.square("x", 0, 0, 10)  # exact and small: the ring of 20 + 2 bits, lifted from there
    be.mul("x", "y", 0, 0, (60, 60))  # exact near the top: the whole ring, no lift
    be.truncate("x", 48, 85)  # a sum of products: a masked opening
    assert be.products == [
        Product((20, 30), 83, 35),
        Product((10,), 22, 22),
        Product((60, 60), 128, None),
    ]
    # a product's two cross terms both choose with the narrower operand's reshared 20 + 2
    # bits and their top bit, one OLE each way
    product, square = be.products[:2]
    assert (product.forward_ots, product.reverse_ots, product.reshared_width) == (23, 23, 22)
    assert product.forward_bytes() == product.reverse_bytes() == correction_bytes(23, 83)
    # a square: one OLE in reverse, and one wrap OT forward in the ring's top 22 - 12 bits
    assert (square.forward_ots, square.reverse_ots, square.reshared_width) == (1, 13, 12)
    assert square.forward_bytes() == (
        22 - 12 + 7
    ) // 8 and square.reverse_bytes() == correction_bytes(13, 22)
    assert be.truncations == [85]
    # a lift of an n-bit share: one correction in the ring's top 128 - n bits
    assert lift_bytes(35) == (128 - 35 + 7) // 8 == 12
