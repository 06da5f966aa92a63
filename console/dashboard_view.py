"""The dashboard (``/dashboard``, ``/api/dashboard``): broker TPS in and out and the top 10
topics' TPS over the last hour, from the console's :mod:`~rocketq.console.sampler`.

The charts are drawn on the server as inline SVG by pygal; what pygal would add that
reaches outside the page (its JavaScript, comments with its web address, the namespace
URL, which HTML does not need) is taken out, so the page draws with no network and no
script.
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

import pygal
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rocketq.console.pages import render
from rocketq.console.sampler import Sampler

TOP_TOPICS: Final = 10
X_LABELS: Final = 8
_COMMENT: Final = re.compile(r"<!--.*?-->", re.S)
_SCRIPT: Final = re.compile(r"<script\b.*?</script>", re.S)
_XMLNS: Final = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')


def sampler_of(request: Request) -> Sampler:
    sampler: Sampler = request.app.state.sampler
    return sampler


def inline_svg(chart: pygal.Line) -> Markup:
    """The chart as an ``<svg>`` element for an HTML page: no script, no comment, no URL."""
    svg = chart.render(is_unicode=True)
    svg = _XMLNS.sub("", _SCRIPT.sub("", _COMMENT.sub("", svg)))
    # pygal's own markup, every text in it escaped by pygal.
    return Markup(svg)


def _clock(at_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at_ms / 1000))


def line_chart(title: str, timestamps: list[int], series: dict[str, list[float]]) -> Markup:
    chart = pygal.Line(
        title=title,
        width=900,
        height=320,
        js=[],
        disable_xml_declaration=True,
        show_dots=len(timestamps) < 30,
        dots_size=2,
        x_label_rotation=20,
        show_minor_x_labels=False,
        x_labels_major_count=X_LABELS,
        y_title="messages/s",
        legend_at_bottom=True,
        include_x_axis=True,
        truncate_legend=40,
    )
    chart.x_labels = [_clock(t) for t in timestamps]
    for name, values in series.items():
        chart.add(name, values)
    return inline_svg(chart)


def charts(data: dict[str, Any]) -> dict[str, Markup] | None:
    """The two charts; None until there are two samples (nothing to difference yet)."""
    stamps: list[int] = data["timestamps"]
    if not stamps:
        return None
    brokers = {
        f"{broker} {way}": figures[f"tps_{way}"]
        for broker, figures in data["brokers"].items()
        for way in ("in", "out")
    }
    topics = {topic: figures["tps_in"] for topic, figures in data["topics"].items()}
    return {
        "brokers": line_chart("Broker TPS (in and out)", stamps, brokers),
        "topics": line_chart(f"Topic TPS in (top {TOP_TOPICS})", stamps, topics),
    }


async def dashboard_page(request: Request) -> Response:
    data = sampler_of(request).snapshot()
    return render(request, "dashboard.html", {**data, "charts": charts(data)})


async def api_dashboard(request: Request) -> Response:
    return JSONResponse(sampler_of(request).snapshot())


ROUTES: Final = [
    Route("/dashboard", dashboard_page),
    Route("/api/dashboard", api_dashboard),
]
