"""Flags a run would not use: an error naming the flag and what it needs, never a silent
drop. ``Noted`` (the ``action=`` of such flags in ``_options``) records the flags the user
typed, so a default is never taken for a request; ``refuse_unused_flags`` is the check a
learning command runs on its arguments before any work (``ppbn learn``, ``ppbn simulate``,
``ppbn reference``), the narrower ones run where the flags become job parameters.
"""

from __future__ import annotations

import argparse
from typing import Any

from ppbn.errors import UserError

GIVEN = "given_flags"  # the Namespace attribute Noted fills: {dest: the flag as typed}


class Noted(argparse.Action):
    """``store``, and a note that the user typed the flag (a default is never noted): a flag
    the run would not use is refused only when given, whatever its value."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, GIVEN, {**getattr(namespace, GIVEN, {}), self.dest: option_string})


def refuse_given(args: argparse.Namespace, dests: tuple[str, ...], needs: str) -> None:
    """A user error for the first of ``dests`` the user gave: "--white-list needs --search hc"."""
    given = getattr(args, GIVEN, {})
    for dest in dests:
        if dest in given:
            raise UserError(f"{given[dest]} needs {needs}")


HC_FLAGS = ("tabu", "start", "black_list", "white_list", "fixed_edges")
LEARNING_FLAGS = ("max_parents", "score", "search", "ess", "tau", "order", "c_star", "dirichlet")
DP_COMPANIONS = ("dp_delta", "dp_structure_share", "dp_release")
SECURE_FLAGS = (
    "disclosure",
    "key_bits",
    "overlap_tables",
    "split_terms",
    "term_lanes",
    "ot_k",
    "dp_epsilon",
    *DP_COMPANIONS,
)


def refuse_unused_search_flags(args: argparse.Namespace) -> None:
    """The flags of a search or score other than the one asked for (the default K2, exact)."""
    if getattr(args, "search", "k2") == "hc":
        refuse_given(args, ("order",), "--search k2 (hill climbing takes no node order)")
    else:
        refuse_given(args, HC_FLAGS, "--search hc")
    score = getattr(args, "score", "exact")
    if score != "bdeu":
        refuse_given(args, ("ess",), "--score bdeu")
    if score != "bic":
        refuse_given(args, ("c_star",), "--score bic")


def refuse_unused_dp_flags(args: argparse.Namespace) -> None:
    """--dp-delta, --dp-structure-share and --dp-release without --dp-epsilon (the release
    would be exact)."""
    if getattr(args, "dp_epsilon", None) is None:
        refuse_given(args, DP_COMPANIONS, "--dp-epsilon (without it the release is exact)")


def refuse_unused_flags(args: argparse.Namespace, path: str = "secure") -> None:
    """Every learning flag given that this run would not use is a user error naming the flag
    and what it needs, before any work. ``path``: secure (the learn job, or the job of
    --job), job (``ppbn simulate --path job``), pram, perturb, or reference."""
    job = getattr(args, "job", "learn")
    if path in ("secure", "job") and job != "learn":
        refuse_given(
            args,
            LEARNING_FLAGS + HC_FLAGS + SECURE_FLAGS,
            f"--job learn (job {job} takes its parameters from --params)",
        )
    if path in ("pram", "perturb"):
        refuse_given(args, SECURE_FLAGS, "--path secure (the secure learn job)")
    if path == "perturb":
        refuse_given(
            args,
            LEARNING_FLAGS + HC_FLAGS,
            "--path secure or pram (a perturbation learner takes its parameters from --params)",
        )
    refuse_unused_search_flags(args)
    refuse_unused_dp_flags(args)
