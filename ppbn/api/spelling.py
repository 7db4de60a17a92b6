"""How a refusal of ``ppbn.simulate`` names an argument: as the Python API's keyword
(``missing_rate``, ``path='pram'``) or, when the ``ppbn simulate`` command makes the call,
as the command line's flag (``--missing-rate``, ``--path pram``). One check, two
spellings: a person is told about the argument they actually typed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spelling:
    """The keyword (``flags`` false) or the flag (``flags`` true) of an argument."""

    flags: bool

    def __call__(self, name: str) -> str:
        """``missing_rate`` or ``--missing-rate``."""
        return "--" + name.replace("_", "-") if self.flags else name

    def setting(self, name: str, value: object) -> str:
        """An argument with its value: ``path='pram'`` or ``--path pram``."""
        return f"{self(name)} {value}" if self.flags else f"{name}={value!r}"

    def usage(self, name: str, metavar: str, example: str | None = None) -> str:
        """How to give an argument: ``--p P``, or the keyword (``name=example`` with one)."""
        if self.flags:
            return f"{self(name)} {metavar}"
        return f"{name}={example}" if example else name


KEYWORDS = Spelling(flags=False)
FLAGS = Spelling(flags=True)
