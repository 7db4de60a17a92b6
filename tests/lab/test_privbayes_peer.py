"""The PrivBayes peer's faster mutual information equals DataSynthesizer's own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppbn.lab.privbayes_peer import fast_mutual_information


@pytest.mark.parametrize("parents", [1, 2, 3])
def test_fast_mutual_information_equals_sklearns(parents):
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(parents)
    n = 3000
    frame = pd.DataFrame({f"v{j}": [f"s{c}" for c in rng.integers(0, 3, n)] for j in range(4)})
    frame["v0"] = np.where(rng.random(n) < 0.6, frame["v1"], frame["v0"])  # dependent
    chosen = [f"v{j}" for j in range(1, parents + 1)]
    joined = frame[chosen].apply(lambda x: " ".join(x.values), axis=1)
    expected = sklearn.mutual_info_score(frame["v0"], joined)
    assert fast_mutual_information(frame["v0"], frame[chosen]) == pytest.approx(expected, abs=1e-12)
    assert fast_mutual_information(frame["v0"], frame[[chosen[0]]]) == pytest.approx(
        sklearn.mutual_info_score(frame["v0"], frame[chosen[0]]), abs=1e-12
    )
