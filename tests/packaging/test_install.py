"""Installing the built package: the wheel carries the gRPC stubs, and no extra breaks them.

``python -m build`` makes the sdist from a copy of the source tree and the wheel from that
sdist, so the ``.proto`` file must be in the sdist and ``setup.py`` must generate the stubs
(``docs/decisions/protobuf-majors.md``). Each case installs the wheel with one extra into
a virtual environment and, from outside the source tree with ``python -I`` (only
the installed package), imports the stubs with every warning an error, runs
``ppbn --help`` and imports what the extra is for. The no-extra environment also runs
``ppbn demo``, which must learn the reference network; the bench environment runs
``ppbn bench psi`` next to openmined-psi, the extra that pins protobuf.

Measured on a 2-core machine with PyPI reachable: building takes 5-15 s, the no-extra
environment about 12 s (this interpreter's pip installs into it, without compiling
bytecode up front), the bench extra on top of it a few seconds. So the default run keeps
the no-extra environment and layers the ``bench`` extra onto it after the no-extra
checks; the other extras (``ray``, ``parquet``, ``docs``, ``dev``) are marked
``packaging_full``, each in a fresh environment: ``make check-install`` runs all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUBS = ("party_pb2.py", "party_pb2_grpc.py", "party_pb2.pyi")
# What each extra is for, imported in its environment: the extra must load next to the stubs.
PURPOSE = {
    "": "ppbn.parties.daemon, opendp.prelude",  # opendp: the DP plan's privacy maps
    "bench": "private_set_intersection.python, DataSynthesizer.DataDescriber",
    "ray": "ray",
    "parquet": "pyarrow.parquet",
    "docs": "mkdocs, material",
    "dev": "pytest, grpc_tools, build, ray, pyarrow.parquet, mkdocs",
}
DEFAULT = ("", "bench")
LAYERED = ("bench",)  # installed into the no-extra environment (``venvs``)
FULL = ("ray", "parquet", "docs", "dev")
# Not copied for the build: environments, caches, outputs and generated stubs.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "build",
    "dist",
    "site",
    "out",
    "demo-out",
    "*.egg-info",
    "*_pb2*",
)


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["COLUMNS"] = "200"  # rich wraps ppbn's output at the terminal width
    return env


def _run(args: list, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel built from it, from a copy of the source tree."""
    work = tmp_path_factory.mktemp("build")
    source = work / "src"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    _run([sys.executable, "-m", "build", "--outdir", work / "dist", source], work, 300)
    return work / "dist"


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (found,) = dist.glob("ppbn-*.whl")
    return found


@pytest.fixture(scope="module")
def venvs(wheel, tmp_path_factory):
    """``venvs(extra)``: the bin folder of a virtual environment with ``wheel[extra]``.

    The bench extra is installed on top of the no-extra environment (whose own tests run
    first, in file order), which saves a second install of every base dependency; each
    ``packaging_full`` extra gets a fresh environment of its own."""
    made: dict[str, Path] = {}

    def install(bin_dir: Path, spec: str, where: Path) -> None:
        # this interpreter's pip installs into the environment (--python), so the
        # environment needs no pip of its own; --no-compile: the packages' bytecode is
        # written at first import instead of all at install time
        pip = [sys.executable, "-m", "pip", "--python", bin_dir / "python"]
        _run([*pip, "install", "--quiet", "--no-compile", spec], where, 540)

    def get(extra: str) -> Path:
        if extra not in made:
            spec = f"{wheel}[{extra}]" if extra else str(wheel)
            if extra in LAYERED:
                bin_dir = get("")
                install(bin_dir, spec, bin_dir.parent)
            else:
                where = tmp_path_factory.mktemp(f"venv-{extra or 'plain'}")
                _run([sys.executable, "-m", "venv", "--without-pip", where / "v"], where, 120)
                bin_dir = where / "v" / "bin"
                install(bin_dir, spec, where)
            made[extra] = bin_dir
        return made[extra]

    yield get
    for bin_dir in set(made.values()):  # a few hundred MB each: not left for pytest to keep
        shutil.rmtree(bin_dir.parent, ignore_errors=True)


def test_the_sdist_carries_the_proto_and_the_wheel_the_stubs(dist, wheel):
    (sdist,) = dist.glob("ppbn-*.tar.gz")
    with tarfile.open(sdist) as tar:
        in_sdist = {Path(n).name for n in tar.getnames() if "/ppbn/proto/" in n}
    assert "party.proto" in in_sdist
    assert not in_sdist & set(STUBS), "generated stubs belong in the wheel, not the sdist"
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
    assert {f"ppbn/proto/{name}" for name in STUBS} <= in_wheel


@pytest.mark.slow
def test_demo_from_the_installed_wheel(venvs, tmp_path):
    """First in the file, so that the no-extra environment has no extra yet (``venvs``)."""
    shown = _run([venvs("") / "ppbn", "demo"], tmp_path, 400).stdout
    assert "structure and edge order: equal to the reference" in shown


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [*DEFAULT, *(pytest.param(e, marks=pytest.mark.packaging_full) for e in FULL)],
)
def test_each_extra_loads_the_stubs(venvs, extra, tmp_path):
    bin_dir = venvs(extra)
    loaded = _run(
        [
            bin_dir / "python",
            "-I",
            "-W",
            "error",
            "-c",
            "import google.protobuf, ppbn, ppbn.proto.party_pb2, ppbn.proto.party_pb2_grpc\n"
            "print(ppbn.__file__, google.protobuf.__version__)",
        ],
        tmp_path,
        120,
    )
    where, protobuf = loaded.stdout.split()
    assert Path(where).is_relative_to(bin_dir.parent), f"ppbn loaded from {where}"
    assert int(protobuf.split(".")[0]) >= 7, f"protobuf {protobuf} with extra {extra!r}"
    assert "usage: ppbn" in _run([bin_dir / "ppbn", "--help"], tmp_path, 120).stdout
    _run([bin_dir / "python", "-I", "-c", f"import {PURPOSE[extra]}"], tmp_path, 300)


@pytest.mark.slow
def test_bench_psi_runs_next_to_openmined(venvs, tmp_path):
    """The bench extra's purpose: the same sets through ppbn's PSI and openmined-psi's."""
    shown = _run(
        [venvs("bench") / "ppbn", "bench", "psi", "--size", "2000", "--format", "json"],
        tmp_path,
        300,
    ).stdout
    result = json.loads(shown.strip().splitlines()[-1])
    assert result["ppbn"]["correct"]
    assert result["openmined_psi"] is not None, "openmined-psi did not load"
    assert result["openmined_psi"]["correct"]
