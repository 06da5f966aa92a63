"""``rocketq bench produce --embedded --metrics-compare``: what counting costs.

One run, clusters one after the other, alternating (off-on, on-off, ...): a broker with its
metrics server off (nothing counted) and one with it on and scraped every
``scrape_interval`` seconds by a process of its own (by default every second, far more often
than Prometheus' usual 15 s, so the scrapes' cost shows too). Each cluster gets
the same ``rocketq bench produce`` load; the report is the median msgs/s of each kind and
their ratio.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketq.bench.client_bench import EMBEDDED_SETTINGS, produce, run
from rocketq.cluster.launcher import ClusterSpec, LocalCluster


def _scrape(urls: list[str], interval: float, stop: Any, count: Any, errors: Any) -> None:
    """A scraper process of its own, as Prometheus is: GET every URL every ``interval``
    seconds until ``stop`` is set."""
    while not stop.wait(interval):
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    resp.read()
                with count.get_lock():
                    count.value += 1
            except OSError as exc:
                with errors.get_lock():
                    errors.value += 1
                print(f"scraping {url} failed: {exc}", flush=True)


class _Scraper:
    """The scraper process, started and stopped around one measurement."""

    def __init__(self, urls: list[str], interval: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self.count = ctx.Value("i", 0)
        self.errors = ctx.Value("i", 0)
        self.proc = ctx.Process(
            target=_scrape, args=(urls, interval, self.stop, self.count, self.errors), daemon=True
        )

    def __enter__(self) -> _Scraper:
        self.proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def metrics_compare(
    *,
    topic: str,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    queues: int,
    rounds: int,
    scrape_interval: float,
    data_dir: str | None,
    echo: Callable[[str], None],
) -> dict[str, object]:
    tps: dict[str, list[float]] = {"off": [], "on": []}
    scrapes = 0
    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    for round_no in range(1, rounds + 1):
        # Off then on, then on then off: neither kind always runs first.
        order = ("off", "on") if round_no % 2 else ("on", "off")
        for mode in order:
            with tempfile.TemporaryDirectory(prefix="bench-metrics-", dir=base) as tmp:
                spec = ClusterSpec(
                    data_dir=Path(tmp), broker_settings=EMBEDDED_SETTINGS, metrics=mode == "on"
                )
                with LocalCluster(spec) as cluster:
                    echo(f"round {round_no}/{rounds}, metrics {mode}")
                    urls = [n.metrics_url for n in cluster.nodes if n.metrics_port]
                    with contextlib.ExitStack() as stack:
                        scraper = (
                            stack.enter_context(_Scraper(urls, scrape_interval)) if urls else None
                        )
                        result = run(
                            lambda: produce(
                                cluster.namesrv_addr,
                                topic=topic,
                                size=size,
                                concurrency=concurrency,
                                batch=batch,
                                duration=duration,
                                messages=0,
                                queues=queues,
                                echo=echo,
                            )
                        )
                    if scraper is not None:
                        if scraper.errors.value:
                            raise RuntimeError(f"{scraper.errors.value} scrapes failed")
                        scrapes += scraper.count.value
                    rate = result["msgs_per_s"]
                    assert isinstance(rate, float | int)
                    tps[mode].append(float(rate))
    off, on = statistics.median(tps["off"]), statistics.median(tps["on"])
    ratio = on / off if off else 0.0
    echo(
        f"metrics off: {off:,.0f} msgs/s, on (scraped every {scrape_interval:g} s): "
        f"{on:,.0f} msgs/s; on/off {ratio:.3f} (drop {(1 - ratio) * 100:.1f} %), "
        f"median of {rounds} round(s) each"
    )
    return {
        "bench": "produce-metrics-compare",
        "size": size,
        "concurrency": concurrency,
        "batch": batch,
        "duration_s": duration,
        "rounds": rounds,
        "scrape_interval_s": scrape_interval,
        "scrapes": scrapes,
        "msgs_per_s_off": round(off, 1),
        "msgs_per_s_on": round(on, 1),
        "runs_off": tps["off"],
        "runs_on": tps["on"],
        "ratio_on_off": round(ratio, 4),
        "drop_pct": round((1 - ratio) * 100, 2),
    }
