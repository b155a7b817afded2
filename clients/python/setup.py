"""Builds specd-client from the repository: the gRPC stubs of the public API are generated from
protos/specd/v1 with grpcio-tools into the wheel (package `specd.v1`, as the protos' package
says), so generated code is never committed and never drifts from the protos."""
from importlib import resources
from pathlib import Path
import re

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

REPOSITORY = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPOSITORY / "protos"
# The public API; verifier.proto and drafter.proto are between specd's own processes.
PUBLIC_PROTOS = ["specd/v1/types.proto", "specd/v1/generation.proto", "specd/v1/trainer.proto"]


def specd_version() -> str:
    """The server's version (the top-level CMakeLists.txt), so client and server agree."""
    text = (REPOSITORY / "CMakeLists.txt").read_text()
    return re.search(r"project\(specd VERSION ([0-9.]+)", text).group(1)


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        from grpc_tools import protoc  # a build requirement (pyproject.toml)

        missing = [p for p in PUBLIC_PROTOS if not (PROTO_ROOT / p).is_file()]
        if missing:
            raise SetupError(f"{missing} not found: build from a checkout of the specd repository")
        out = Path(self.build_lib)
        well_known = resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto
        command = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}",
                   f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}",
                   *PUBLIC_PROTOS]
        if protoc.main(command) != 0:
            raise SetupError("grpc_tools.protoc failed on " + " ".join(PUBLIC_PROTOS))
        for package in (out / "specd", out / "specd" / "v1"):
            (package / "__init__.py").touch()
        (out / "specd" / "py.typed").touch()  # type checkers read the generated .pyi files


setup(version=specd_version(), cmdclass={"build_py": BuildPyWithStubs})
