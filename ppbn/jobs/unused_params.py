"""Job parameters that mean something only together with another: the hill-climbing
settings with ``search`` "hc", the DP release's delta and structure share with
``dp_epsilon``. Given without it, such a parameter would be dropped without a word, so it
is refused, naming it and what it needs.

A parameter counts as given when the request holds it with a value other than None (JSON
null): the normalised form both daemons check (``check_search_params``,
``check_dp_params``) holds None for the settings a job does not use, so the peer's check
of it passes, while a request that leaves a setting out passes too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ppbn.jobs.base import ParameterError

HC_ONLY = ("tabu", "start", "black_list", "white_list", "fixed_edges")
DP_ONLY = ("dp_delta", "dp_structure_share", "dp_release")


def _needs(name: str, params: Mapping[str, Any]) -> str | None:
    """What ``name`` needs that ``params`` lacks, with why; None when it applies."""
    if name in HC_ONLY and params.get("search") != "hc":
        return f"search='hc' ({name} is a hill-climbing setting)"
    if name in DP_ONLY and params.get("dp_epsilon") is None:
        return "dp_epsilon (a setting of the DP release; without dp_epsilon the release is exact)"
    return None


def refuse_unused(
    params: Mapping[str, Any], names: Iterable[str] = HC_ONLY + DP_ONLY, kind: str = ""
) -> None:
    """A ParameterError for the first of ``names`` given in ``params`` (the request as sent,
    before defaults are filled in) that the job would not use: "white_list needs
    search='hc' (...)", prefixed "learn: " with ``kind``. The Python API runs it on its
    keyword arguments before any work, the daemons on the parameters they receive."""
    for name in names:
        if params.get(name) is None:
            continue
        needs = _needs(name, params)
        if needs is not None:
            raise ParameterError(name, f"{kind + ': ' if kind else ''}{name} needs {needs}")
