"""The benchmarks' names and defaults that their commands' help and checks show, without
numpy and the rest (every ``ppbn`` command builds the whole parser first)."""

from __future__ import annotations

# ``bench dp``'s methods, in the order its report and plot list them
DP_METHODS = (
    "ppbn", "twin", "ppbn-marginals", "marginals-twin", "ppbn-adaptive", "adaptive-twin",
    "privbayes", "privbayes-matched", "mst", "aim", "exact",
)  # fmt: skip
