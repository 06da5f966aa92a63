"""One harness under atheris, in a process of its own (started by ``runner.py``).

    python -m rocketq.bench.fuzz.worker HARNESS --findings DIR [--time-limit S]
        [--memory-mb MB] -- [libFuzzer flags and corpus folders]

rocketq's modules are imported under atheris' instrumentation (coverage guides the
mutations). Every input is judged by :func:`rocketq.bench.fuzz.harness.judge`; the first
input of each distinct finding (kind, exception type, where) is written to the findings
folder as ``<kind>-<sha1>`` with ``<kind>-<sha1>.txt`` beside it (the exception and its
traceback), and a line ``FINDING <kind> <file> <signature>`` goes to stderr. Fuzzing goes
on after a finding. The address space is limited (RLIMIT_AS) to what the process uses at
start plus ``--memory-mb``, so a decoder that allocates without bound gets MemoryError (an
oom finding); libFuzzer's own -timeout and -rss_limit_mb catch what Python cannot (a hang
inside one C call). This is the only module that imports atheris.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
from pathlib import Path

import atheris


def _address_space() -> int:
    """Bytes of address space this process has mapped now."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[0])
    return pages * resource.getpagesize()


def main(argv: list[str] | None = None) -> None:
    args_in = sys.argv[1:] if argv is None else argv
    ours, _, libfuzzer = (
        (args_in[: args_in.index("--")], "--", args_in[args_in.index("--") + 1 :])
        if "--" in args_in
        else (args_in, "", [])
    )
    parser = argparse.ArgumentParser(prog="rocketq.bench.fuzz.worker")
    parser.add_argument("harness")
    parser.add_argument("--findings", type=Path, required=True)
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--memory-mb", type=int, default=2048)
    args = parser.parse_args(ours)

    # Only what the transport logs as an unexpected error is read (by the broker harness);
    # the broker's warnings about bad requests are expected and left out.
    logging.getLogger().addHandler(logging.NullHandler())
    logging.getLogger().setLevel(logging.CRITICAL)

    with atheris.instrument_imports(include=["rocketq"]):
        from rocketq.bench.fuzz.harness import input_name, judge
        from rocketq.bench.fuzz.targets import HARNESSES, cleanup

    harness = HARNESSES[args.harness]
    if harness.setup is not None:
        harness.setup()
    findings: Path = args.findings
    findings.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    limit = _address_space() + args.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def test_one_input(data: bytes) -> None:
        finding = judge(harness, data, time_limit=args.time_limit)
        if finding is None or finding.signature in seen:
            return
        seen.add(finding.signature)
        name = input_name(finding.kind, data)
        (findings / name).write_bytes(data)
        (findings / f"{name}.txt").write_text(
            f"{finding.signature}\n{finding.exception}\n\n{finding.trace}"
        )
        print(f"FINDING {finding.kind} {name} {finding.signature}", file=sys.stderr, flush=True)

    try:
        atheris.Setup([sys.argv[0], *libfuzzer], test_one_input)
        atheris.Fuzz()
    finally:  # reached when libFuzzer returns instead of exiting (e.g. -runs=0)
        if harness.teardown is not None:
            harness.teardown()
        cleanup()


if __name__ == "__main__":
    main()
