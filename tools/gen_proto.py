"""Generate the protobuf modules of ``common/proto/rocketq/v1/rocketq.proto``.

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


if __name__ == "__main__":
    for path in generate():
        print(f"wrote {path.relative_to(ROOT)}")
