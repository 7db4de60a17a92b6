"""Tables for people: what the benchmark commands print with ``--format table``."""

from __future__ import annotations

import json


def print_table(title: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """One rich table for people (``--format table``); the JSON form prints the figures instead."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(header):
        table.add_column(column, no_wrap=i == 0)  # the row's name whole, the figures wrap
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def kernels_text(kernels: dict) -> str:
    """A warm-up's seconds (``kernels.warm.warm_up``), and whether it compiled the kernels
    or loaded them from numba's cache."""
    how = "compiled" if kernels["compiled"] else "from cache"
    return f"{kernels['seconds']:.2f} ({how})"


def report_measures(result: dict, fmt: str, title: str, rows: list[tuple[str, str]]) -> int:
    """One JSON object for scripts, or a measure/value table for people."""
    if fmt == "json":
        print(json.dumps(result))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("measure")
    table.add_column("value", justify="right")
    for measure, value in rows:
        table.add_row(measure, value)
    Console().print(table)
    return 0
