"""Build hook: the gRPC stubs of ``ppbn/proto/*.proto``, generated at build time.

``party_pb2.py``, ``party_pb2_grpc.py`` and ``party_pb2.pyi`` are not kept in git. The
``build_proto`` step runs ``grpc_tools.protoc`` (the ``grpcio-tools`` of
``[build-system] requires``, pinned there) before ``build_py``, writing next to the
``.proto`` file, so a wheel, ``pip install .`` and an editable install all carry the stubs.
Everything else about the package is in ``pyproject.toml``; see
``docs/decisions/protobuf-majors.md`` for why the ``grpcio-tools`` version is pinned.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build import build

PROTO_DIR = Path("ppbn") / "proto"


class BuildProto(Command):
    """Generate ``*_pb2.py``, ``*_pb2_grpc.py`` and ``*_pb2.pyi`` from ``ppbn/proto/*.proto``."""

    description = "generate the gRPC stubs from ppbn/proto/*.proto"
    user_options: list = []

    def initialize_options(self) -> None:
        pass

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        from importlib.resources import files

        from grpc_tools import protoc

        well_known = str(files("grpc_tools") / "_proto")
        protos = sorted(PROTO_DIR.glob("*.proto"))
        if not protos:
            raise RuntimeError(f"no .proto files in {PROTO_DIR}")
        for proto in protos:
            args = [
                "grpc_tools.protoc",
                f"-I{PROTO_DIR.as_posix()}={PROTO_DIR.as_posix()}",
                f"-I{well_known}",
                "--python_out=.",
                "--grpc_python_out=.",
                "--pyi_out=.",
                proto.as_posix(),
            ]
            if protoc.main(args) != 0:
                raise RuntimeError(f"grpc_tools.protoc failed on {proto}")


class BuildWithProto(build):
    sub_commands = [("build_proto", None), *build.sub_commands]


setup(cmdclass={"build": BuildWithProto, "build_proto": BuildProto})
