"""The secure path's own flags: disclosure, key size, how K2 overlaps its work with the
wire, terms lanes and the OT extension's k."""

from __future__ import annotations

import argparse

from ppbn.commands.checked_numbers import int_in
from ppbn.commands.job_options import DISCLOSURES, add_dp_options
from ppbn.commands.unused_flags import Noted
from ppbn.protocols.constants import (
    AUTO_LANES,
    DEFAULT_SUBFIELD_BITS,
    MAX_TERM_LANES,
    SUBFIELD_CHOICES,
)


def add_secure_options(parser: argparse.ArgumentParser) -> None:
    """Options of the secure path (job ``learn``) besides the shared learning options."""
    group = parser.add_argument_group("secure path (job learn)")
    group.add_argument(
        "--disclosure",
        choices=DISCLOSURES,
        default="public",
        action=Noted,
        help="who learns the CPTs: public (both), owner (the owner of each variable), "
        "shared (each party keeps shares; `ppbn shares combine` opens them) (default public)",
    )
    group.add_argument(
        "--key-bits",
        type=int,
        choices=(2048, 3072),
        action=Noted,
        help="Paillier key size (default 2048)",
    )
    add_overlap_option(group)
    add_dp_options(group)


def add_overlap_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--overlap-tables and --split-terms: how K2 overlaps its work with the wire."""
    parser.add_argument(
        "--overlap-tables",
        choices=("on", "off"),
        default="on",
        action=Noted,
        help="score each K2 step's families in groups, the next group's Paillier table phase "
        "running while the current group's terms cross the wire: on (default) hides most of "
        "the table phase behind a slow link; off runs the phases one after the other, which "
        "is faster when both daemons share one small host (docs/user-guide.md, 'Overlapping work with the wire')",
    )
    parser.add_argument(
        "--split-terms",
        choices=("on", "off"),
        default="off",
        action=Noted,
        help="run each batch of at least 1,024 secure ln terms as two halves side by side on "
        "two lanes, so one half computes while the other's bytes cross the wire: on for a slow "
        "link (child across 100mbit/20ms: -1.6 s on average); off (default) on a fast link or "
        "when both daemons share one small host, where the second thread costs more than it "
        "hides (docs/user-guide.md, 'Two halves of each batch of terms')",
    )
    add_term_lanes_option(
        parser,
        "run each large batch of secure ln terms across N processes of each party, each "
        "on a lane of its own, so the term phase uses N cores per party; auto (default): "
        "each party offers the cores its pool's workers leave, the job takes the smaller "
        "offer, and a network too small to fill two lanes runs in the job's own thread; "
        "each party's policy caps N (max_term_lanes; docs/user-guide.md, 'Terms on many cores')",
        auto=True,
    )
    add_ot_k_option(parser)


def add_term_lanes_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, help_text: str, auto: bool = False
) -> None:
    """--term-lanes N: the terms lanes per party (``term_lanes``), 1 to MAX_TERM_LANES;
    with ``auto`` (a job's) also "auto", the default, which the parties agree on."""
    parser.add_argument(
        "--term-lanes",
        type=lanes_or_auto if auto else int_in(1, MAX_TERM_LANES),
        default=AUTO_LANES if auto else 1,
        action=Noted,
        metavar="N",
        help=help_text,
    )


def lanes_or_auto(text: str) -> int | str:
    """--term-lanes of a job: "auto", or a number of lanes in 1..MAX_TERM_LANES."""
    return AUTO_LANES if text == AUTO_LANES else int_in(1, MAX_TERM_LANES)(text)


def add_ot_k_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--ot-k {4,8}: SoftSpokenOT's k of the job's OT extensions (``ot_k``)."""
    parser.add_argument(
        "--ot-k",
        type=int,
        choices=SUBFIELD_CHOICES,
        default=DEFAULT_SUBFIELD_BITS,
        action=Noted,
        help="SoftSpokenOT's k for the secure terms' OT extensions: 8 (default) sends 2 bytes "
        "of extension message per OT, the fewest bytes, best on links below about 650 Mbit/s; "
        "4 sends 4 bytes (+12%% per exact term) for an eighth of the AES work, best on faster "
        "links and on one host (docs/user-guide.md, 'Less CPU per OT on a fast link')",
    )
