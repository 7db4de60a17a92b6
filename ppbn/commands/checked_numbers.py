"""Checked numbers for ``type=`` of numeric flags: a count, size or duration of zero or
below means nothing; checked here, argparse names the flag the user typed ("argument
--records: must be a positive integer (got 0)") instead of a later check tripping over
some other flag it affects."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer (got {text!r})") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text})")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1: record counts, repeats, sizes."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {value})")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0: seeds, parent limits, lengths where 0 means none."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (got {value})")
    return value


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer in low..high, e.g. a worker count."""

    def check(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high} (got {value})")
        return value

    check.__name__ = f"int in {low}..{high}"  # argparse shows the name on a conversion error
    return check


def positive_float(text: str) -> float:
    """A number > 0: timeouts, sample sizes, multipliers."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number (got {text})")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0: tolerances and pseudo-counts, where 0 means none."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number (got {text})")
    return value
