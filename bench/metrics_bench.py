"""``rocketq bench produce --embedded --metrics-compare``: what counting costs.

One run, clusters one after the other, alternating: a broker with its metrics server off
(nothing counted) and one with it on and scraped every ``scrape_interval`` seconds (far
more often than Prometheus' usual 15 s, so the scrapes' cost shows too). Each cluster gets
the same ``rocketq bench produce`` load; the report is the median msgs/s of each kind and
their ratio.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.client_bench import EMBEDDED_SETTINGS, produce, run
from rocketq.cluster.launcher import ClusterSpec, LocalCluster


class _Scraper(threading.Thread):
    """GETs every URL every ``interval`` seconds until stopped; counts what it fetched."""

    def __init__(self, urls: list[str], interval: float) -> None:
        super().__init__(daemon=True, name="metrics-scraper")
        self.urls = urls
        self.interval = interval
        self.done = threading.Event()
        self.scrapes = 0
        self.bytes = 0
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.done.wait(self.interval):
            for url in self.urls:
                try:
                    with urllib.request.urlopen(url, timeout=5) as resp:
                        self.bytes += len(resp.read())
                    self.scrapes += 1
                except OSError as exc:
                    self.errors.append(f"{url}: {exc}")


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
        for mode in ("off", "on"):
            with tempfile.TemporaryDirectory(prefix="bench-metrics-", dir=base) as tmp:
                spec = ClusterSpec(
                    data_dir=Path(tmp), broker_settings=EMBEDDED_SETTINGS, metrics=mode == "on"
                )
                with LocalCluster(spec) as cluster:
                    echo(f"round {round_no}/{rounds}, metrics {mode}")
                    scraper = _Scraper(
                        [n.metrics_url for n in cluster.nodes if n.metrics_port], scrape_interval
                    )
                    if mode == "on":
                        scraper.start()
                    try:
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
                    finally:
                        scraper.done.set()
                        if scraper.is_alive():
                            scraper.join()
                    if scraper.errors:
                        raise RuntimeError("scraping failed: " + "; ".join(scraper.errors[:3]))
                    scrapes += scraper.scrapes
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
