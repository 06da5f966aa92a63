"""Generate the protobuf modules of ``common/proto/rocketq/v1/rocketq.proto``, and those of
RocketMQ 5's ``apache.rocketmq.v2`` API (``../shared/proto``, apache/rocketmq-apis v2.1.2)
with its gRPC stubs into ``broker/grpc_v2/`` (the v2 endpoint).

protoc names a generated module's imports after the proto file's path below its include
root, so the proto is compiled from where it lies in the installed namespace
(``rocketq/common/proto/...``) and the generated modules import
``rocketq.common.proto.rocketq.v1``, as the package installs them.

    python tools/gen_proto.py            # what `make proto` runs
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "common" / "proto" / "rocketq" / "v1"
PROTO = "rocketq.proto"
INSTALLED = Path("rocketq/common/proto/rocketq/v1")
GENERATED = ("rocketq_pb2.py", "rocketq_pb2.pyi")


def generate(dest: Path = SOURCE_DIR) -> list[Path]:
    """Compile the proto and write the generated modules into ``dest``."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / INSTALLED).mkdir(parents=True)
        shutil.copy(SOURCE_DIR / PROTO, work / INSTALLED / PROTO)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                ".",
                "--python_out=.",
                "--pyi_out=.",
                str(INSTALLED / PROTO),
            ],
            cwd=work,
            check=True,
        )
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for name in GENERATED:
            shutil.copy(work / INSTALLED / name, dest / name)
            written.append(dest / name)
        return written


V2_SOURCE = ROOT.parent / "shared" / "proto" / "apache" / "rocketmq" / "v2"
V2_PROTOS = ("definition.proto", "service.proto", "admin.proto")
V2_INSTALLED = Path("rocketq/broker/grpc_v2")
V2_DEST = ROOT / "broker" / "grpc_v2"


def generate_v2(source: Path = V2_SOURCE, dest: Path = V2_DEST) -> list[Path]:
    """Compile the v2 protos as if they lay in the installed namespace (their imports of
    each other rewritten to that path), so the generated modules import
    ``rocketq.broker.grpc_v2``; the package and service names stay ``apache.rocketmq.v2``."""
    if not (source / V2_PROTOS[0]).exists():
        raise SystemExit(f"the apache.rocketmq.v2 protos are not at {source}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / V2_INSTALLED).mkdir(parents=True)
        for name in V2_PROTOS:
            text = (source / name).read_text()
            text = text.replace('import "apache/rocketmq/v2/', f'import "{V2_INSTALLED}/')
            (work / V2_INSTALLED / name).write_text(text)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                ".",
                "--python_out=.",
                "--pyi_out=.",
                "--grpc_python_out=.",
                *(str(V2_INSTALLED / name) for name in V2_PROTOS),
            ],
            cwd=work,
            check=True,
        )
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for generated in sorted((work / V2_INSTALLED).glob("*_pb2*.py*")):
            shutil.copy(generated, dest / generated.name)
            written.append(dest / generated.name)
        return written


if __name__ == "__main__":
    for path in [*generate(), *generate_v2()]:
        print(f"wrote {path.relative_to(ROOT)}")
