"""The learning flags every learner shares (score, search, hill climbing, K2 order), so
the same flag means the same thing in every command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TABU, DEFAULT_TAU, SCORE_MODES
from ppbn.bn.networks import NETWORKS
from ppbn.commands.checked_numbers import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from ppbn.commands.unused_flags import Noted, refuse_unused_search_flags
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.bn.learn import HCOptions


SEARCHES = ("k2", "hc")


def add_learning_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every learner (reference, secure, PRAM): same meaning everywhere."""
    parser.add_argument(
        "--max-parents",
        type=non_negative_int,
        default=2,
        action=Noted,
        help="parent limit u (default 2)",
    )
    parser.add_argument(
        "--score",
        choices=SCORE_MODES,
        action=Noted,
        default="exact",
        help="exact (ln f), yw (Yang-Wright eq. 6), yw0 (eq. 6 minus zero cells), bic, bdeu "
        "(default exact)",
    )
    parser.add_argument(
        "--search",
        choices=SEARCHES,
        default="k2",
        action=Noted,
        help="k2 (needs a node order; the default) or hc: hill climbing over DAGs, no order "
        "(on the PRAM path: setup 2 only)",
    )
    parser.add_argument(
        "--ess",
        type=positive_float,
        default=DEFAULT_ESS,
        action=Noted,
        help=f"BDeu equivalent sample size (default {DEFAULT_ESS:g}, as pgmpy; needs --score bdeu)",
    )
    parser.add_argument(
        "--tau",
        type=non_negative_float,
        default=DEFAULT_TAU,
        action=Noted,
        help=f"K2 tolerance in nats: add a parent only if the score rises by more than tau "
        f"(default {DEFAULT_TAU:g})",
    )
    parser.add_argument(
        "--order",
        action=Noted,
        help="K2 node order as a comma list (default: schema order; needs --search k2)",
    )
    parser.add_argument(
        "--c-star",
        type=positive_float,
        default=1.0,
        action=Noted,
        help="BIC penalty multiplier C* (default 1; needs --score bic)",
    )
    parser.add_argument(
        "--dirichlet",
        type=non_negative_float,
        default=0.0,
        action=Noted,
        metavar="A",
        help="Dirichlet pseudo-count for parameters (default 0: maximum likelihood)",
    )
    add_hc_options(parser)


def add_hc_options(parser: argparse.ArgumentParser) -> None:
    """Hill-climbing options of the reference learner (pgmpy's HillClimbSearch semantics);
    each is refused without --search hc (``refuse_unused_search_flags``)."""
    group = parser.add_argument_group(
        "hill climbing (--search hc; each of these is refused without it)"
    )
    group.add_argument(
        "--tabu",
        type=non_negative_int,
        default=DEFAULT_TABU,
        action=Noted,
        metavar="N",
        help=f"tabu list length: the last N moves may not be undone (default {DEFAULT_TABU}, as pgmpy)",
    )
    group.add_argument(
        "--start",
        action=Noted,
        metavar="FILE",
        help="start DAG: a JSON list of [parent, child] edges, or a network.json",
    )
    group.add_argument(
        "--black-list", action=Noted, metavar="FILE", help="JSON list of edges never to add"
    )
    group.add_argument(
        "--white-list",
        action=Noted,
        metavar="FILE",
        help="JSON list of the only edges that may be added",
    )
    group.add_argument(
        "--fixed-edges",
        action=Noted,
        metavar="FILE",
        help="JSON list of edges always present (never deleted or reversed)",
    )


def hc_options(args: argparse.Namespace) -> HCOptions:
    """``HCOptions`` from the command line; file and edge errors are user errors."""
    from ppbn.bn.hc import read_edge_file
    from ppbn.bn.learn import HCOptions

    def edges(option: str):
        path = getattr(args, option.replace("-", "_"), None)
        if path is None:
            return None
        try:
            return read_edge_file(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--{option}: {path}: file not found") from None
        except ValueError as exc:  # JSONDecodeError included
            raise UserError(f"--{option}: {path}: {exc}") from None

    if args.tabu < 0:
        raise UserError("--tabu must be >= 0")
    return HCOptions(
        args.tabu, edges("start"), edges("black-list"), edges("white-list"), edges("fixed-edges")
    )


def hc_job_params(args: argparse.Namespace) -> dict:
    """The hill-climbing parameters of the learn job (none for K2, where a hill-climbing
    flag is refused): the search, the tabu length and the edge lists read from their files
    (both daemons check them)."""
    refuse_unused_search_flags(args)
    if getattr(args, "search", "k2") != "hc":
        return {}
    opts = hc_options(args)
    params: dict = {"search": "hc", "tabu": opts.tabu_length}
    for name in ("start", "black_list", "white_list", "fixed_edges"):
        edges = getattr(opts, name)
        if edges is not None:
            params[name] = [[p, c] for p, c in edges]
    return params


def search_options(args: argparse.Namespace) -> dict:
    """``learn_reference`` keyword arguments for the search the command line asked for
    (the flags of another search refused)."""
    refuse_unused_search_flags(args)
    search = getattr(args, "search", "k2")
    return {"search": search, "hc": hc_options(args) if search == "hc" else None}


def parse_order(text: str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """The K2 node order: schema order by default, or a comma list naming every variable once."""
    from ppbn.api.simulate_paths import checked_order
    from ppbn.api.spelling import FLAGS

    order = [s.strip() for s in (text or "").split(",") if s.strip()]
    return tuple(checked_order(order, names, FLAGS))


def refuse_on_private_paths(args: argparse.Namespace, path: str = "secure") -> None:
    """The one place where the private paths (``learn``, ``simulate``, ``bench k2``) refuse
    what they cannot run: hill climbing in PRAM setup I (each child's owner learns its own
    families there, while a move is chosen among both parties')."""
    if getattr(args, "search", "k2") != "k2" and path == "PRAM" and getattr(args, "setup", 2) != 2:
        raise UserError(
            "--search hc on the PRAM path needs --setup 2 (a miner): in setup I each child's owner "
            "scores its own families, and a move is chosen among both parties' families"
        )


def add_learn_run_options(parser: argparse.ArgumentParser) -> None:
    """The data and learning options of a benchmark that runs the learn job on sampled data."""
    parser.add_argument("--network", required=True, help=f"one of: {', '.join(NETWORKS)}")
    parser.add_argument("--records", type=positive_int, required=True)
    parser.add_argument("--max-parents", type=non_negative_int, default=2)
    parser.add_argument("--score", choices=SCORE_MODES, default="exact")
    parser.add_argument(
        "--ess",
        type=float,
        default=DEFAULT_ESS,
        help=f"BDeu equivalent sample size (default {DEFAULT_ESS:g})",
    )
    parser.add_argument("--tau", type=float, default=DEFAULT_TAU)
    parser.add_argument("--seed", type=non_negative_int, default=7)
