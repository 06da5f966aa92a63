"""The checked-in protobuf and gRPC modules are exactly what `make proto` generates."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO = Path("cluster/proto/rocketq/v1/rocketq.proto")
GENERATED = ("rocketq_pb2.py", "rocketq_pb2.pyi", "rocketq_pb2_grpc.py")


def test_generated_modules_match_the_proto(tmp_path: Path) -> None:
    (tmp_path / PROTO.parent).mkdir(parents=True)
    shutil.copy(ROOT / PROTO, tmp_path / PROTO)
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
            str(PROTO),
        ],
        cwd=tmp_path,
        check=True,
    )
    for name in GENERATED:
        fresh = (tmp_path / PROTO.parent / name).read_text()
        checked_in = (ROOT / PROTO.parent / name).read_text()
        assert fresh == checked_in, f"{name} is stale: run `make proto` and commit the result"
