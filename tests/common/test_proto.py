"""The checked-in protobuf modules are exactly what `make proto` generates."""

from __future__ import annotations

from pathlib import Path

from tools.gen_proto import GENERATED, SOURCE_DIR, generate


def test_generated_modules_match_the_proto(tmp_path: Path) -> None:
    generate(tmp_path)
    for name in GENERATED:
        fresh = (tmp_path / name).read_text()
        checked_in = (SOURCE_DIR / name).read_text()
        assert fresh == checked_in, f"{name} is stale: run `make proto` and commit the result"


def test_generated_modules_import_the_installed_names() -> None:
    from rocketq.common.proto.rocketq.v1 import rocketq_pb2

    assert rocketq_pb2.DESCRIPTOR.name == "rocketq/common/proto/rocketq/v1/rocketq.proto"
    assert rocketq_pb2.RaftMessage.__module__ == "rocketq.common.proto.rocketq.v1.rocketq_pb2"


def test_no_grpc_service_is_generated() -> None:
    from rocketq.common.proto.rocketq.v1 import rocketq_pb2

    assert not rocketq_pb2.DESCRIPTOR.services_by_name
    assert not (SOURCE_DIR / "rocketq_pb2_grpc.py").exists()


def test_the_v2_modules_match_the_protos(tmp_path: Path) -> None:
    from tools.gen_proto import V2_DEST, generate_v2

    fresh = generate_v2(dest=tmp_path)
    assert fresh, "nothing generated"
    for path in fresh:
        checked_in = (V2_DEST / path.name).read_text()
        assert path.read_text() == checked_in, (
            f"broker/grpc_v2/{path.name} is stale: run `make proto` and commit the result"
        )


def test_each_v2_module_imports_on_its_own() -> None:
    """A generated module loads the descriptors it depends on itself (a clean process)."""
    import subprocess
    import sys

    for name in ("definition_pb2", "service_pb2", "admin_pb2"):
        done = subprocess.run(
            [sys.executable, "-c", f"import rocketq.broker.grpc_v2.{name}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
