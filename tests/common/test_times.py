"""One time parser for the CLI, the console, the Spark pipeline and the Spark source's
startingTimestamp: the same text is the same instant in all of them, whatever time zone
the machine is in; a time without an offset is UTC, one with an offset is that instant; a
bad time is an error naming the field."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from rocketq.cli import admin_cli
from rocketq.cli.main import app
from rocketq.common import times
from rocketq.console import messages_view
from rocketq.console.topics_view import BadInputError
from rocketq.sdk.spark import pipeline
from rocketq.sdk.spark.options import SparkOptionError, parse_read_options
from rocketq.sdk.spark.pipeline import PipelineError


def ms_of(moment: datetime) -> int:
    return (moment - times.EPOCH) // timedelta(milliseconds=1)


def cli(text: str) -> int:
    return admin_cli.parse_time(text)


def console(text: str) -> int:
    ms = messages_view.parse_time(text, "begin")
    assert ms is not None
    return ms


def spark(text: str) -> int:
    moment = pipeline.parse_time(text, "--since")
    assert moment.tzinfo is not None and moment.utcoffset() == timedelta(0)
    return ms_of(moment)


def spark_source(text: str) -> int:
    read = {"namesrv": "127.0.0.1:9876", "topic": "T", "startingTimestamp": text}
    ms = parse_read_options(read, streaming=False).starting_timestamp
    assert ms is not None
    return ms


CALLERS: list[Callable[[str], int]] = [times.parse_ms, cli, console, spark, spark_source]


def instants_everywhere(text: str) -> set[int]:
    """What each caller makes of ``text``: one instant when they agree."""
    return {parse(text) for parse in CALLERS}


# Instants with a millisecond, far enough from year 1 and 9999 that any offset stays inside.
instants = st.integers(
    min_value=ms_of(datetime(2, 1, 1, tzinfo=UTC)),
    max_value=ms_of(datetime(9998, 12, 31, tzinfo=UTC)),
)
offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


def text_forms(ms: int, offset: timezone) -> list[str]:
    """Ways of writing the instant ``ms``: naive ones mean UTC, the others carry an offset."""
    utc = times.from_ms(ms)
    there = utc.astimezone(offset)
    naive = utc.replace(tzinfo=None)
    forms = [
        times.format_ms(ms),
        utc.isoformat(timespec="milliseconds"),
        there.isoformat(timespec="milliseconds"),
        naive.isoformat(timespec="milliseconds"),
        naive.isoformat(sep=" ", timespec="milliseconds"),
        f"{naive.year:04d}-{naive:%m-%d#%H:%M:%S}:{ms % 1000:03d}",  # mqadmin's
    ]
    if ms >= 0:
        forms.append(str(ms))
    return forms


@given(instants)
def test_formatting_an_instant_and_parsing_it_back_gives_the_instant(ms: int) -> None:
    text = times.format_ms(ms)
    assert text.endswith("Z")
    assert times.parse_ms(text) == ms
    assert times.parse_datetime(text) == times.from_ms(ms)


@given(instants, offsets)
def test_every_form_of_an_instant_is_that_instant_in_the_cli_console_and_pipeline(
    ms: int, offset: timezone
) -> None:
    for text in text_forms(ms, offset):
        assert instants_everywhere(text) == {ms}, text


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)), offsets)
def test_an_offset_counts_and_no_offset_means_utc(naive: datetime, offset: timezone) -> None:
    floor_ms = ms_of(naive.replace(tzinfo=UTC))
    assert times.parse_ms(naive.isoformat()) == floor_ms
    assert times.parse_ms(naive.replace(tzinfo=offset).isoformat()) == ms_of(
        naive.replace(tzinfo=offset)
    )


@given(st.integers(min_value=1, max_value=times.MAX_MS))
def test_what_the_cli_shows_reads_back_as_the_same_instant(ms: int) -> None:
    # ``rocketq admin`` tables show stored times; pasted into --timestamp they are the same.
    shown = admin_cli._time(ms)
    assert cli(shown) == ms


def test_what_the_three_took_before_is_still_taken() -> None:
    berlin_half_past_two = ms_of(datetime(2026, 3, 29, 2, 30, tzinfo=UTC))
    for text in (
        "1774751400000",  # epoch ms
        "2026-03-29T02:30:00",  # the CLI's format
        "2026-3-29T2:30:00",  # which strptime took unpadded
        "2026-03-29T02:30",  # what a datetime-local input sends
        " 2026-03-29 02:30:00.000 ",  # ISO with a space, padded
        "2026-03-29T04:30:00+02:00",  # ISO with an offset
        "2026-03-29T02:30:00Z",
        "2026-03-29#02:30:00:000",  # mqadmin's yyyy-MM-dd#HH:mm:ss:SSS
    ):
        assert instants_everywhere(text) == {berlin_half_past_two}, text
    assert instants_everywhere("2026-03-29") == {ms_of(datetime(2026, 3, 29, tzinfo=UTC))}


def test_now_is_the_time_now() -> None:
    before = time.time_ns() // 1_000_000
    parsed = [parse("now") for parse in CALLERS]
    after = time.time_ns() // 1_000_000
    assert all(before <= ms <= after for ms in parsed)


# -- time zones ----------------------------------------------------------------------------


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Sets the process's time zone (TZ plus tzset) for the test, and puts it back after."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def local_reading(text: str) -> int:
    """What the CLI made of a naive time before: local time, through mktime."""
    return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")) * 1000)


DST_EDGES = [
    # Berlin skips 02:00-03:00 on 2026-03-29 and repeats it on 2026-10-25.
    ("2026-03-29T02:30:00", datetime(2026, 3, 29, 2, 30, tzinfo=UTC)),
    ("2026-10-25T02:30:00", datetime(2026, 10, 25, 2, 30, tzinfo=UTC)),
]


@pytest.mark.parametrize(("text", "instant"), DST_EDGES)
def test_a_naive_time_in_a_skipped_or_repeated_hour_is_the_same_instant_as_in_utc(
    zone: Callable[[str], None], text: str, instant: datetime
) -> None:
    zone("UTC")
    in_utc = instants_everywhere(text)
    zone("Europe/Berlin")
    assert time.daylight and time.tzname == ("CET", "CEST")  # the zone took
    assert local_reading(text) != ms_of(instant)  # local time would not be UTC here
    for form in (text, text[:16], text.replace("T", " "), text.replace("T", "#") + ":000"):
        assert instants_everywhere(form) == in_utc == {ms_of(instant)}, form


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
def test_a_time_with_an_offset_is_its_instant_whatever_the_zone(
    zone: Callable[[str], None], name: str
) -> None:
    zone(name)
    skipped = ms_of(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    assert instants_everywhere("2026-03-29T02:30:00+02:00") == {skipped}
    assert instants_everywhere("2026-03-29T00:30:00Z") == {skipped}
    repeated = ms_of(datetime(2026, 10, 25, 0, 30, tzinfo=UTC))
    assert instants_everywhere("2026-10-25T02:30:00+02:00") == {repeated}
    assert instants_everywhere("2026-10-25T02:30:00+01:00") == {repeated + 3_600_000}


# -- bad times -----------------------------------------------------------------------------

BAD = ["yesterday", "2026-13-01", "2026-02-30T10:00", "12:30", "-5", "1e3", "²", "0x10", ""]
OUT_OF_RANGE = [str(times.MAX_MS + 1), "9" * 30, "9999-12-31T23:30:00-01:00"]


@pytest.mark.parametrize("text", [*BAD, *OUT_OF_RANGE])
def test_a_bad_time_is_a_value_error_saying_what_to_give(text: str) -> None:
    with pytest.raises(ValueError, match="give ") as raised:
        times.parse_ms(text)
    if text in OUT_OF_RANGE:
        assert "9999-12-31" in str(raised.value)
    else:
        assert "UTC unless it ends in an offset" in str(raised.value)


@pytest.mark.parametrize("text", [*BAD, *OUT_OF_RANGE])
def test_each_caller_names_its_field(text: str) -> None:
    with pytest.raises(typer.BadParameter) as cli_error:
        admin_cli.parse_time(text, "--begin")
    assert cli_error.value.param_hint == "'--begin'" and repr(text) in str(cli_error.value)
    with pytest.raises(PipelineError, match=f"^--until {text!r} is not a time: give "):
        pipeline.parse_time(text, "--until")
    if text:
        with pytest.raises(BadInputError, match=f"^end must be a time, got {text!r}: give "):
            messages_view.parse_time(text, "end")
    else:
        assert messages_view.parse_time(text, "end") is None  # an empty field is no bound
    read = {"namesrv": "127.0.0.1:9876", "topic": "T", "startingTimestamp": text}
    with pytest.raises(SparkOptionError, match=r"^option startingTimestamp must be a time"):
        parse_read_options(read, streaming=False)


def test_the_cli_prints_a_usage_error_naming_the_option() -> None:
    args = ["admin", "reset-offset-by-time", "-g", "G", "-t", "T", "-s", "2026-03-29T25:00"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "'--timestamp'" in result.output and "'2026-03-29T25:00'" in result.output
    assert "UTC unless it ends in an offset" in result.output


def test_help_texts_say_utc() -> None:
    for command in (["admin", "reset-offset-by-time"], ["admin", "dlq", "list"]):
        result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "300"})
        assert result.exit_code == 0 and "UTC unless it ends in an offset" in result.output
