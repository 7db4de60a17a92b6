"""Start-up: building the ``ppbn`` parser loads none of the heavy libraries.

Every ``ppbn`` command, ``ppbn --help`` included, builds the whole parser first, so the
command modules import only what their parsers need (argparse, ``ppbn.errors``,
the commands' shared option modules and the layers' ``constants`` modules) and the rest inside the
functions that run a command. This checks what is imported, in a fresh interpreter; it
times nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "numpy",
    "pgmpy",
    "grpc",
    "cryptography",
    "pandas",
    "scipy",
    "rich",
    "gmpy2",
    "networkx",
    "matplotlib",
    "torch",
    "ray",
    "numba",
)
BUILD_PARSER = (
    "import json, sys\n"
    "from ppbn.cli import build_parser\n"
    "build_parser()\n"
    f"heavy = set({list(HEAVY)!r})\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
)


def test_building_the_parser_imports_no_heavy_library():
    done = subprocess.run(
        [sys.executable, "-c", BUILD_PARSER], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [], (
        "building the parser imported heavy modules (move the import into the function that "
        f"runs the command, or the constant into a constants module): {loaded}"
    )
