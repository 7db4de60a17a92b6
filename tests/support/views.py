"""What a party receives, as byte statistics: for the view-independence tests of the
secure path (test_secure_k2, test_secure_dp)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def sign_profiles(transcript) -> dict[tuple[str, int], np.ndarray]:
    """Per (tag, byte position within a 16-byte word): how many bytes are 0x00, 0xFF or
    anything else. A masked value's high bytes are sign extension and its low bytes
    uniform, so this profile is what a magnitude leak (too few mask bits, an unmasked
    count) changes."""
    profiles: dict[tuple[str, int], np.ndarray] = defaultdict(lambda: np.zeros(3, dtype=np.int64))
    for tag, payload in transcript:
        data = np.frombuffer(payload, dtype=np.uint8)
        width = 16 if data.size % 16 == 0 else 1
        for position, column in enumerate(data.reshape(-1, width).T):
            zeros, ones = int(np.sum(column == 0)), int(np.sum(column == 255))
            profiles[(tag, position)] += np.array([zeros, ones, column.size - zeros - ones])
    return profiles


def profile_p_value(a: np.ndarray, b: np.ndarray, design_effect: float) -> float | None:
    """The chi-square p-value that two runs' profiles of one (tag, position) come from the
    same distribution, the statistic deflated by the design effect of reused shares; None
    when there is nothing to test (fewer than two categories used, or equal profiles)."""
    from scipy import stats

    used = (a + b) > 0
    if used.sum() < 2 or np.array_equal(a, b):
        return None
    statistic, _, dof, _ = stats.chi2_contingency(np.vstack([a[used], b[used]]), correction=False)
    return float(stats.chi2.sf(statistic / design_effect, dof))
