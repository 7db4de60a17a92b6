"""The cost model of a secure term (issue 12, ``protocols.cost``) against the bytes the
channel counts in ``ppbn bench ln``, message kind by message kind."""

from __future__ import annotations

import json

from ppbn.cli import main
from ppbn.protocols.cost import CountingBackend, ole_bytes, term_cost


def test_every_modelled_kind_matches_the_measured_bytes(capsys) -> None:
    assert main(["bench", "ln", "--count", "400", "--modes", "yw,exact,bdeu", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    modelled = [row for row in report["bytes_by_mode_and_kind"] if row["model_bytes_per_evaluation"] is not None]
    assert {row["kind"] for row in modelled} >= {"yao.tables", "arith.ole.y", "ot.ext.u", "arith.lookup", "yao.garbler_labels"}
    for row in modelled:  # framing (a tag and a size per message) is all the model leaves out
        assert abs(row["bytes_per_evaluation"] - row["model_bytes_per_evaluation"]) <= 0.002 * row["bytes_per_evaluation"] + 1, row
    for mode in report["modes"]:
        # the rest is one-time set-up (base OTs, GGM trees: ~70 KB a run), spread over 400 terms
        assert 0 <= mode["bytes_per_evaluation"] - mode["model_bytes_per_evaluation"] <= 200, mode


def test_model_counts_what_the_term_arithmetic_multiplies() -> None:
    yw, exact = term_cost(15, "yw"), term_cost(15, "exact")
    assert yw.and_gates < exact.and_gates and yw.ots < exact.ots and yw.total < exact.total
    # a Gilboa OLE of w bits: 4 bytes of u per OT and 16 bytes of correction shrinking by one
    # byte every 8 bits of position
    assert ole_bytes(1) == 4 + 16 and ole_bytes(9) == 9 * 4 + 8 * 16 + 15
    be = CountingBackend()
    be.mul("x", "y", 48, 80, (20, 30))
    be.square("x", 0, 0, 10)
    assert (be.products, be.squares, be.truncations) == ([(20, 30)], [10], 1)
