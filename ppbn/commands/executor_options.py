"""Where a party's bulk work runs and the local policy of a pair a command starts: the
executor flags and the resource flags laid over the policy."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ppbn.commands.checked_numbers import int_in
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.jobs.policy import LocalPolicy


MAX_WORKERS = 1024  # a local worker pool's ceiling, as the local policy's own rule for workers


def add_executor_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, who: str
) -> None:
    """--executor, --workers and --ray-address: where this party's bulk arithmetic runs."""
    parser.add_argument(
        "--executor",
        choices=("local", "ray", "inline"),
        help=f"where {who} bulk work runs (chunks of Paillier encryptions, decryptions and "
        "products; garbled chunks and OT-extension blocks of runs past the policy's gc_inline_below "
        "and ot_inline_below): local (a process pool on this host, the default), ray (this party's own Ray "
        "cluster, `pip install 'ppbn[ray]'`), inline (this process)",
    )
    parser.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        help=f"worker processes of {who} local pool (default: one per core)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this party's running Ray cluster (e.g. 10.0.0.5:6379; see docs/user-guide.md, 'Scale-out'); "
        "default with --executor ray: a private Ray instance on this host",
    )


def check_executor_flags(executor: str, ray_address: str | None) -> None:
    """One-line errors for an executor this host cannot run, before any data is read."""
    from ppbn.errors import UserError
    from ppbn.protocols.executor import check_ray_address, ray_missing_message

    if ray_address and executor != "ray":
        raise UserError("--ray-address is only for --executor ray")
    if executor == "ray":
        if ray_address:  # before importing ray, which takes seconds
            try:
                check_ray_address(ray_address)
            except ConnectionError as exc:
                raise UserError(f"--executor ray: cannot join Ray: {exc}") from None
        missing = ray_missing_message()
        if missing is not None:
            raise UserError(missing)


def apply_resource_flags(policy: LocalPolicy, args: argparse.Namespace) -> LocalPolicy:
    """The policy with this command line's resource flags on top (flags win; all local)."""
    from dataclasses import replace

    changes = {
        name: getattr(args, name)
        for name in ("workers", "executor", "ray_address", "cache_mb", "spill_mb", "spill_dir")
        if getattr(args, name, None) is not None
    }
    if changes:
        if "ray_address" in changes and "executor" not in changes:
            changes["executor"] = "ray"
        if changes.get("ray_address") and changes["executor"] != "ray":
            raise UserError("--ray-address is only for --executor ray")
        executor = {"executor": changes.get("executor", policy.executor)}
        for name, value in changes.items():  # each against the policy's own rule, by its flag
            try:
                replace(policy, **{**executor, name: value}).validate()
            except UserError as exc:
                rule = str(exc).partition(f"policy setting {name} ")[2] or str(exc)
                raise UserError(f"--{name.replace('_', '-')} {value}: {rule}") from None
        policy = replace(policy, **changes)
        policy.validate()
    check_executor_flags(policy.executor, policy.ray_address)
    return policy


def add_pair_policy_options(parser: argparse.ArgumentParser) -> None:
    """--policy FILE and the executor flags of a command that starts both daemons itself."""
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="local policy file both daemons enforce (default: the built-in policy, which refuses "
        "e.g. 1024-bit keys, fewer than 100 records and PRAM p below 0.1; see `ppbn policy show`)",
    )
    add_executor_options(parser.add_argument_group("executor (each daemon's own)"), "each daemon's")


def pair_policy(args: argparse.Namespace) -> LocalPolicy | None:
    """The local policy both daemons of a local pair enforce: --policy FILE, else the
    built-in; --executor, --workers and --ray-address on top (each daemon its own executor)."""
    from ppbn.jobs.policy import LocalPolicy

    if (
        not args.policy
        and args.executor is None
        and args.workers is None
        and args.ray_address is None
    ):
        return None
    return apply_resource_flags(LocalPolicy.load(args.policy), args)
