"""The DP release's defaults and limits, without imports (the CLI's options read them)."""

DEFAULT_STRUCTURE_SHARE = 0.3  # PrivBayes's beta (Zhang et al. 2017, Sec. 4.4)
DEFAULT_DELTA = 1e-9  # the largest delta a job accepts unless asked otherwise
DP_SCORES = ("exact", "bic")  # score modes with a stated sensitivity (accounting.score_sensitivity)
MIN_EPSILON, MAX_EPSILON = 1e-3, 20.0  # above 20 a release is hardly private at all
# what a DP learn job releases: "network", K2's structure and every family's noisy counts;
# "marginals", a tree of pairs and the noisy 1-way and 2-way counts (dp/marginal_release.py);
# "adaptive", pairs chosen round by round against a fitted model (dp/adaptive_release.py)
RELEASES = ("network", "marginals", "adaptive")
DEFAULT_RELEASE = "network"
