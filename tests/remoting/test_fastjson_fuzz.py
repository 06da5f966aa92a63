"""fastjson's loose JSON and the answer helpers that read it, valid and then broken.

Values of the shapes RocketMQ's bodies take (string, number and object keys, nested
objects and arrays) round-trip through dumps and loads; mutated texts parse or raise
ValueError (FastjsonDecodeError or not UTF-8), never anything else, within a time and
memory bound; the nesting check agrees with the parser's own depth; and the answer
helpers return a value or raise a RocketqError.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import RocketqError
from rocketq.remoting import answer, fastjson
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.fastjson import MAX_DEPTH, ObjectKey, dumps, loads, too_deep
from tests.fuzz_mutations import mutated, mutated_text
from tests.remoting.time_bound import bounded

# Hypothesis warns when it writes out a nested recursive strategy; the values are small.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ: Final = settings(
    max_examples=300,
    deadline=2000,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
TEXT: Final = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
# Strings that look like JSON's own syntax, to trip a scanner that does not skip strings.
TRICKY: Final = st.text(st.sampled_from('[]{}"\\:,ué'), max_size=8)
SCALARS: Final = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
    | TRICKY
)


def values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Values of fastjson's shapes: dicts keyed by strings, numbers or ObjectKeys."""

    def grow(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keys = (
            TEXT
            | TRICKY
            | st.integers()
            | st.dictionaries(TEXT, children, max_size=2).map(ObjectKey.of)
        )
        return st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)

    # Deferred: the recursive strategy's own repr grows with every level, for nothing.
    return st.deferred(lambda: st.recursive(SCALARS, grow, max_leaves=max_leaves))


def depth(value: Any) -> int:
    """Nesting levels of arrays and objects (an ObjectKey key is an object, a tuple in it an
    array)."""
    if isinstance(value, ObjectKey):
        return 1 + max((depth(v) for _, v in value), default=0)
    if isinstance(value, list | tuple):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max([depth(v) for v in value.values()] + [depth(k) for k in value], default=0)
    return 0


def parse(text: str | bytes) -> Any:
    result = bounded(lambda: loads(text), ValueError)
    assert not isinstance(result, BaseException) or isinstance(result, ValueError)
    return result


@FUZZ
@given(values())
def test_values_round_trip(value: Any) -> None:
    text = dumps(value)
    assert parse(text) == value
    assert dumps(parse(text)) == text


@FUZZ
@given(st.data(), values())
def test_mutated_text_parses_or_raises_value_error(data: st.DataObject, value: Any) -> None:
    text = dumps(value)
    parse(data.draw(mutated(text)))
    parse(data.draw(mutated_text(text.decode())))


@FUZZ
@given(values(max_leaves=40), st.integers(0, 8))
def test_too_deep_is_exact_on_valid_text(value: Any, limit: int) -> None:
    text = dumps(value)
    assert too_deep(text, limit) == (depth(value) > limit)
    assert too_deep(text.decode(), limit) == (depth(value) > limit)


@FUZZ
@given(st.text(st.sampled_from('[]{}"\\ ,:1ax'), max_size=60), st.integers(0, 6))
def test_text_that_is_not_too_deep_never_nests_past_the_limit(text: str, limit: int) -> None:
    """Whatever the text, the parser limited to ``limit`` levels never reaches its limit
    when the check said it would not (json.loads nests as the parser does, up to the first
    error, which stops both)."""
    if too_deep(text, limit):
        return
    saved = fastjson.MAX_DEPTH
    fastjson.MAX_DEPTH = limit  # type: ignore[misc]  # the parser reads it at each level
    try:
        fastjson._Parser(text).parse()
    except fastjson.FastjsonDecodeError as exc:
        assert "nesting deeper" not in str(exc), text
    finally:
        fastjson.MAX_DEPTH = saved  # type: ignore[misc]


def test_the_limit_is_the_parsers() -> None:
    assert parse("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert isinstance(parse("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)), ValueError)


# -- the answer helpers ------------------------------------------------------------------


@FUZZ
@given(st.data(), values())
def test_answer_helpers_return_or_raise_rocketq_error(data: st.DataObject, value: Any) -> None:
    body = data.draw(st.sampled_from([dumps(value), dumps({"table": value, "n": 1})]))
    body = data.draw(mutated(body) | st.just(body))
    header = data.draw(
        st.dictionaries(st.sampled_from(["offset", "n"]), TEXT | TRICKY | st.integers().map(str))
    )
    code = data.draw(
        st.sampled_from([ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR, 17, -1, 1 << 40])
    )
    reply = RemotingCommand(code, header, body, remark=data.draw(TEXT | st.none()))

    def read() -> object:
        doc = answer.body_doc(reply, "fuzz")
        answer.object_field(doc, "table", "fuzz")
        answer.int_field(doc, "n", "fuzz", 0)
        answer.bool_field(doc, "n", "fuzz", False)
        answer.text_field(doc, "table")
        return answer.header_int(reply, "offset", "fuzz")

    bounded(read, RocketqError)
