"""SQL92 filters: every operator, three-valued logic, precedence and compile errors."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import SubscriptionParseFailedError
from rocketq.common.sql92 import MAX_NESTING, Sql92Filter, compile_expression, validate


def matches(expression: str, **props: str) -> bool:
    return compile_expression(expression).matches(props)


@pytest.mark.parametrize(
    ("expression", "props", "expected"),
    [
        # = and <> / != against strings, numbers and booleans
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "X"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {"a": "x"}, False),
        ("a != 'x'", {"a": "y"}, True),
        ("a != 'x'", {"a": "x"}, False),
        ("a = 10", {"a": "10"}, True),
        ("a = 10", {"a": "10.0"}, True),
        ("a = 10", {"a": "11"}, False),
        ("a <> 10", {"a": "11"}, True),
        ("a <> 10", {"a": "10"}, False),
        ("a = TRUE", {"a": "true"}, True),
        ("a = TRUE", {"a": "TRUE"}, True),
        ("a = TRUE", {"a": "false"}, False),
        ("a = FALSE", {"a": "False"}, True),
        ("a <> TRUE", {"a": "false"}, True),
        # ordering: numbers only, property values read as numbers
        ("a > 9", {"a": "10"}, True),
        ("a > 9", {"a": "9"}, False),
        ("a >= 9", {"a": "9"}, True),
        ("a >= 9", {"a": "8"}, False),
        ("a < 9", {"a": "8"}, True),
        ("a < 9", {"a": "9"}, False),
        ("a <= 9", {"a": "9"}, True),
        ("a <= 9", {"a": "10"}, False),
        ("9 < a", {"a": "10"}, True),
        ("9 < a", {"a": "9"}, False),
        ("a > b", {"a": "10", "b": "9"}, True),
        ("a > b", {"a": "10", "b": "x"}, False),
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a = b", {"a": "x", "b": "y"}, False),
        # decimals, negatives, exponents
        ("a > -1.5", {"a": "-1"}, True),
        ("a > -1.5", {"a": "-2"}, False),
        ("a < - 1.5", {"a": "-1.6"}, True),
        ("a = 1.5", {"a": "1.50"}, True),
        ("a > 0.5", {"a": ".75"}, True),
        ("a = 1e3", {"a": "1000"}, True),
        ("a < +2", {"a": "1.99"}, True),
        # BETWEEN, NOT BETWEEN (inclusive bounds)
        ("a BETWEEN 1 AND 3", {"a": "1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3.5"}, False),
        ("a BETWEEN -3 AND -1", {"a": "-2"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
        # IN, NOT IN
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x', 'y')", {"a": "x"}, False),
        # IS NULL, IS NOT NULL
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a IS NOT NULL", {}, False),
        # CONTAINS, STARTSWITH, ENDSWITH and their NOTs
        ("a CONTAINS 'ell'", {"a": "hello"}, True),
        ("a CONTAINS 'ell'", {"a": "help"}, False),
        ("a NOT CONTAINS 'ell'", {"a": "help"}, True),
        ("a NOT CONTAINS 'ell'", {"a": "hello"}, False),
        ("a STARTSWITH 'he'", {"a": "hello"}, True),
        ("a STARTSWITH 'he'", {"a": "oh"}, False),
        ("a NOT STARTSWITH 'he'", {"a": "oh"}, True),
        ("a NOT STARTSWITH 'he'", {"a": "hello"}, False),
        ("a ENDSWITH 'lo'", {"a": "hello"}, True),
        ("a ENDSWITH 'lo'", {"a": "low"}, False),
        ("a NOT ENDSWITH 'lo'", {"a": "low"}, True),
        ("a NOT ENDSWITH 'lo'", {"a": "hello"}, False),
        # AND, OR, NOT, parentheses, constants
        ("a = 1 AND b = 2", {"a": "1", "b": "2"}, True),
        ("a = 1 AND b = 2", {"a": "1", "b": "3"}, False),
        ("a = 1 OR b = 2", {"a": "0", "b": "2"}, True),
        ("a = 1 OR b = 2", {"a": "0", "b": "0"}, False),
        ("NOT a = 1", {"a": "2"}, True),
        ("NOT a = 1", {"a": "1"}, False),
        ("NOT NOT a = 1", {"a": "1"}, True),
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("TRUE AND a = 1", {"a": "1"}, True),
    ],
)
def test_operators(expression: str, props: dict[str, str], expected: bool) -> None:
    assert compile_expression(expression).matches(props) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "a > 1",
        "a = 1",
        "a = 'x'",
        "a <> 'x'",
        "a = TRUE",
        "a BETWEEN 1 AND 2",
        "a NOT BETWEEN 1 AND 2",
        "a IN ('x')",
        "a NOT IN ('x')",
        "a CONTAINS 'x'",
        "a NOT CONTAINS 'x'",
        "a STARTSWITH 'x'",
        "a NOT ENDSWITH 'x'",
        "a = b",
    ],
)
def test_a_missing_property_matches_neither_the_test_nor_its_negation(expression: str) -> None:
    assert not matches(expression, b="x")
    assert not matches(f"NOT ({expression})", b="x")


def test_unreadable_values_are_unknown_not_false() -> None:
    for expression in ("a > 1", "a = 1", "a = TRUE", "a BETWEEN 1 AND 2"):
        assert not matches(expression, a="abc")
        assert not matches(f"NOT ({expression})", a="abc")
    assert not matches("a > 1", a="nan") and not matches("a < 1", a="-inf")


def test_sql_truth_tables_for_unknown() -> None:
    # FALSE AND UNKNOWN is FALSE, so its negation matches; TRUE AND UNKNOWN stays UNKNOWN.
    assert matches("NOT (b = 1 AND a > 1)", b="2")
    assert not matches("NOT (b = 1 AND a > 1)", b="1")
    # TRUE OR UNKNOWN is TRUE; FALSE OR UNKNOWN stays UNKNOWN.
    assert matches("b = 1 OR a > 1", b="1")
    assert not matches("NOT (b = 1 OR a > 1)", b="2")


def test_and_binds_tighter_than_or_and_not_tighter_than_and() -> None:
    expression = "a = 1 OR b = 2 AND c = 3"
    assert matches(expression, a="1", b="0", c="0")
    assert matches(expression, a="0", b="2", c="3")
    assert not matches(expression, a="0", b="2", c="0")
    assert not matches("(a = 1 OR b = 2) AND c = 3", a="1", b="0", c="0")
    assert matches("NOT a = 1 AND b = 2", a="0", b="2")
    assert not matches("NOT (a = 1 AND b = 2)", a="1", b="2")


def test_string_literals_escape_quotes_and_keep_spaces() -> None:
    assert matches("a = 'it''s'", a="it's")
    assert matches("a = ''''", a="'")
    assert matches("a = ''", a="")
    assert matches("a = ' x  y '", a=" x  y ")
    assert matches("a IN ('o''k', 'and')", a="o'k")


def test_keywords_are_case_insensitive_and_names_are_not() -> None:
    assert matches("a between 1 and 3 AnD b iS nOt NuLl Or c In ('x')", a="2", b="")
    assert matches("a = true", a="TRUE")
    assert matches("not a contains 'x'", a="y")
    assert not matches("A = 1", a="1")


def test_tags_and_dotted_names_are_plain_properties() -> None:
    assert matches("TAGS = 'TagA'", TAGS="TagA")
    assert matches("TAGS IN ('TagA', 'TagB') AND region = 'eu'", TAGS="TagB", region="eu")
    assert not matches("TAGS = 'TagA'", tags="TagA")
    assert compile_expression("order.id > 5").matches({"order.id": "6"})


def test_numbers_in_properties_compare_as_numbers_not_text() -> None:
    assert matches("a > 9", a="10")  # '10' < '9' as text
    assert matches("a = 7", a="007")
    assert matches("a > 1", a="1.5")
    assert matches("a < 1e3", a="999.999")
    assert matches("a > 1", a="9" * 5000)  # beyond int()'s digit limit: read as a float


def test_empty_search_strings_never_match() -> None:
    for expression in ("a CONTAINS ''", "a NOT CONTAINS ''", "a STARTSWITH ''"):
        assert not matches(expression, a="x")


def test_filter_is_a_value_and_compiles_are_cached() -> None:
    first = compile_expression("a > 1")
    assert first is compile_expression("a > 1")
    assert first == Sql92Filter("a > 1", lambda props: None)
    assert "a > 1" in repr(first)
    assert validate("a > 1") is None


def test_long_chains_do_not_recurse() -> None:
    expression = " AND ".join(f"p{i} = '{i}'" for i in range(3000))
    props = {f"p{i}": str(i) for i in range(3000)}
    assert compile_expression(expression).matches(props)


@pytest.mark.parametrize(
    ("expression", "problem", "position"),
    [
        ("", "the expression is empty", 1),
        ("   ", "the expression is empty", 1),
        ("a > ", "expected a value", 5),
        ("a = 'abc", "unterminated string literal", 5),
        ("a = 'it''s", "unterminated string literal", 5),
        ("a = 1 b = 2", "unexpected 'b' after a complete condition", 7),
        ("a = 1)", "unexpected ')'", 6),
        ("(a = 1", "expected ')'", 7),
        ("a = 1 AND", "expected a condition", 10),
        ("a", "expected an operator", 2),
        ("a > 'x'", "'>' compares numbers only, not the string 'x'", 5),
        ("'x' <= a", "'<=' compares numbers only", 1),
        ("a < TRUE", "compares numbers only, not the boolean 'TRUE'", 5),
        ("a = NULL", "use IS NULL or IS NOT NULL", 5),
        ("NULL <> a", "use IS NULL or IS NOT NULL", 1),
        ("TRUE = 'x'", "cannot compare the boolean 'TRUE' with the string 'x'", 8),
        ("a BETWEEN 3 AND 1", "lower bound 3 is above its upper bound 1", 11),
        ("a BETWEEN 1 AND 'x'", "BETWEEN bounds must be numbers", 17),
        ("a BETWEEN 1 OR 2", "expected AND between the BETWEEN bounds", 13),
        ("a IN ()", "expected a string literal, found ')'", 7),
        ("a IN (1, 2)", "expected a string literal, found '1'", 7),
        ("a IN ('x'", "expected ',' or ')'", 10),
        ("'x' IN ('x')", "IN needs a property name", 1),
        ("a CONTAINS 1", "expected a string literal after CONTAINS", 12),
        ("a NOT = 1", "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT", 7),
        ("a IS 1", "expected NULL after IS", 6),
        ("a > -b", "expected a number after '-'", 6),
        ("a == 1", "'==' is not SQL92; use '='", 3),
        ("a = 1 && b = 2", "use AND", 7),
        ("a = 1 || b = 2", "use OR", 7),
        ("a = 1 ; b", "unexpected character ';'", 7),
        ("1abc = 1", "malformed number '1abc'", 1),
        ("a = 1.2.3", "malformed number '1.2.3'", 5),
        ("a = 1 AND OR b = 1", "expected a condition, found 'OR'", 11),
    ],
)
def test_errors_name_the_problem_and_position(expression: str, problem: str, position: int) -> None:
    with pytest.raises(SubscriptionParseFailedError) as info:
        compile_expression(expression)
    message = str(info.value)
    assert message.startswith(f"SQL92 expression '{expression}' : ")
    assert problem in message
    assert message.endswith(f" at position {position}")
    with pytest.raises(SubscriptionParseFailedError):
        validate(expression)


def test_error_message_matches_the_documented_form() -> None:
    with pytest.raises(
        SubscriptionParseFailedError,
        match=re.escape("SQL92 expression 'a > ' : expected a value at position 5"),
    ):
        compile_expression("a > ")


def test_nesting_is_limited() -> None:
    compile_expression("(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING)
    with pytest.raises(SubscriptionParseFailedError, match="nest deeper"):
        compile_expression("(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1))
    with pytest.raises(SubscriptionParseFailedError, match="nest deeper"):
        compile_expression("NOT " * (MAX_NESTING + 1) + "a = 1")


# --------------------------------------------------------------------------- properties

EXPRESSIONS = [
    "a > 1.5 AND b <> 'x'",
    "a = 1 OR b = TRUE OR c IS NULL",
    "NOT (a BETWEEN -3 AND 3) AND TAGS IN ('t1', 't2')",
    "a NOT IN ('', 'x') OR NOT b CONTAINS 'y' OR c STARTSWITH '1'",
    "a = b AND b >= c AND NOT a ENDSWITH '0'",
    "a <= -1e3 OR a.b = 'q' OR (b = FALSE AND NOT c IS NOT NULL)",
]
COMPILED = [compile_expression(e) for e in EXPRESSIONS]

values = st.one_of(
    st.text(max_size=8),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["true", "FALSE", "1e400", ".5", "-0", "1_0", "٣", " 1", "x", "t1"]),
)
property_maps = st.dictionaries(st.sampled_from(["a", "b", "c", "a.b", "TAGS", "z"]), values)


@settings(max_examples=150, deadline=None)
@given(props=property_maps)
def test_matching_never_raises_and_is_deterministic(props: dict[str, str]) -> None:
    for compiled in COMPILED:
        answer = compiled.matches(props)
        assert isinstance(answer, bool)
        assert compiled.matches(dict(props)) is answer


@settings(max_examples=150, deadline=None)
@given(props=property_maps)
def test_a_condition_and_its_negation_never_both_match(props: dict[str, str]) -> None:
    for expression in EXPRESSIONS:
        negation = compile_expression(f"NOT ({expression})")
        assert not (compile_expression(expression).matches(props) and negation.matches(props))


@settings(max_examples=150, deadline=None)
@given(props=property_maps)
def test_with_every_property_present_the_answer_is_two_valued(props: dict[str, str]) -> None:
    full = {"a": "1", "b": "2", **props}
    condition = compile_expression("a = 'x' OR b IN ('y', 'z')")
    negation = compile_expression("NOT (a = 'x' OR b IN ('y', 'z'))")
    assert condition.matches(full) != negation.matches(full)
