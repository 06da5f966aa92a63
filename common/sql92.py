"""SQL92 message filters: ``MessageSelector.bySql(...)`` compiled once, run per message.

An expression is compiled once per subscription into nested closures, so the broker runs
it on every message's properties without walking a syntax tree. The grammar is RocketMQ's::

    condition  := or
    or         := and ( OR and )*
    and        := not ( AND not )*
    not        := NOT not | '(' or ')' | TRUE | FALSE | value test
    test       := ( '=' | '<>' | '!=' | '>' | '>=' | '<' | '<=' ) value
                | [NOT] BETWEEN number AND number
                | [NOT] IN '(' string ( ',' string )* ')'
                | [NOT] ( CONTAINS | STARTSWITH | ENDSWITH ) string
                | IS [NOT] NULL
    value      := property | string | number | TRUE | FALSE | NULL
    property   := [A-Za-z_][A-Za-z0-9_.]*     (TAGS is just the property named TAGS)
    string     := 'text'                       ('' stands for one quote)
    number     := [+|-] digits [. digits] [e [+|-] digits]

Keywords are case-insensitive. Property values are strings: against a number they are
read as numbers, against TRUE/FALSE as 'true'/'false' in any case, against a string they
are compared exactly. ``>``, ``>=``, ``<``, ``<=`` and BETWEEN compare numbers only.

Evaluation uses SQL's three truth values: a test on a missing property, or on a value that
does not read as the literal's type, is UNKNOWN; NOT UNKNOWN is UNKNOWN; AND and OR follow
the SQL tables; a message matches only when the whole condition is TRUE. Evaluation never
raises. Mistakes in the expression raise :class:`SubscriptionParseFailedError` at compile
time, naming the problem and its 1-based character position.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from rocketq.common.exceptions import SubscriptionParseFailedError

__all__ = ["MAX_EXPRESSION_LENGTH", "MAX_NESTING", "Sql92Filter", "compile_expression", "validate"]

MAX_EXPRESSION_LENGTH: Final = 65536
"""Longest expression compiled, in characters (the broker compiles a subscription on its
event loop; a longer one would hold it for seconds)."""

MAX_NESTING: Final = 100
"""Deepest allowed nesting of parentheses and NOTs (keeps compile and evaluation off the
recursion limit; long AND/OR chains are flat and not limited)."""

_Props: TypeAlias = Mapping[str, str]
_Truth: TypeAlias = bool | None  # None is SQL's UNKNOWN
_Predicate: TypeAlias = Callable[[_Props], _Truth]
_Scalar: TypeAlias = str | int | float | bool
_Compare: TypeAlias = Callable[[Any, Any], bool]


@dataclass(frozen=True, slots=True)
class Sql92Filter:
    """A compiled SQL92 expression; ``matches`` is TRUE-only and never raises."""

    expression: str
    _predicate: _Predicate = field(repr=False, compare=False)

    def matches(self, props: Mapping[str, str]) -> bool:
        """True when the condition is TRUE for these message properties (not FALSE/UNKNOWN)."""
        return self._predicate(props) is True


def compile_expression(text: str) -> Sql92Filter:
    """Parse and compile ``text``; raises :class:`SubscriptionParseFailedError` if invalid."""
    return _compile_cached(text)


def validate(text: str) -> None:
    """Check an expression at subscribe time; raises like :func:`compile_expression`."""
    _compile_cached(text)


@functools.lru_cache(maxsize=1024)
def _compile_cached(text: str) -> Sql92Filter:
    return Sql92Filter(text, _Parser(text).parse())


# --------------------------------------------------------------------------- tokens

_KEYWORDS: Final = frozenset(
    {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"}
    | {"CONTAINS", "STARTSWITH", "ENDSWITH"}
)
_COMPARISONS: Final = ("<>", "!=", ">=", "<=", "=", ">", "<")
_MISTAKES: Final = {"==": "use '=' to compare", "&&": "use AND", "||": "use OR"}
_IDENT_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NUMBER_RE: Final = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_WORD_RE: Final = re.compile(r"[\w.]+")
_NUMERIC_TEXT_RE: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # ident keyword number string cmp sign ( ) , eof
    value: _Scalar  # keywords upper-cased, strings unescaped, numbers parsed
    pos: int  # 0-based index into the expression
    source: str  # the text as written, for messages


def _error(text: str, problem: str, index: int) -> SubscriptionParseFailedError:
    shown = text if len(text) <= 200 else text[:200] + "..."
    return SubscriptionParseFailedError(
        f"SQL92 expression '{shown}' : {problem} at position {index + 1}"
    )


def _to_number(raw: str) -> int | float | None:
    """A property value read as a number, or None when it is not one (no NaN, no inf)."""
    if _NUMERIC_TEXT_RE.fullmatch(raw) is None:
        return None
    try:
        return int(raw)
    except ValueError:  # a decimal, an exponent, or more digits than int() will read
        return float(raw)


def _to_bool(raw: str) -> bool | None:
    lowered = raw.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def _scan_string(text: str, start: int) -> tuple[str, int]:
    """The unescaped body of the string literal opening at ``start``, and the index after it."""
    parts: list[str] = []
    i = start + 1
    while True:
        close = text.find("'", i)
        if close < 0:
            raise _error(text, "unterminated string literal", start)
        parts.append(text[i:close])
        if text.startswith("''", close):
            parts.append("'")
            i = close + 2
        else:
            return "".join(parts), close + 1


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "'":
            value, end = _scan_string(text, i)
            tokens.append(_Token("string", value, i, text[i:end]))
            i = end
            continue
        if match := _IDENT_RE.match(text, i):
            word = match.group()
            upper = word.upper()
            if upper in _KEYWORDS:
                tokens.append(_Token("keyword", upper, i, word))
            else:
                tokens.append(_Token("ident", word, i, word))
            i = match.end()
            continue
        if match := _NUMBER_RE.match(text, i):
            end = match.end()
            if end < n and (text[end].isalnum() or text[end] in "_."):
                run = _WORD_RE.match(text, i)
                assert run is not None
                raise _error(text, f"malformed number {run.group()!r}", i)
            number = _to_number(match.group())
            assert number is not None  # _NUMBER_RE only matches numeric text
            tokens.append(_Token("number", number, i, match.group()))
            i = end
            continue
        for mistake, hint in _MISTAKES.items():
            if text.startswith(mistake, i):
                raise _error(text, f"'{mistake}' is not SQL92; {hint}", i)
        op = next((op for op in _COMPARISONS if text.startswith(op, i)), None)
        if op is not None:
            tokens.append(_Token("cmp", "<>" if op == "!=" else op, i, op))
            i += len(op)
            continue
        if ch in "+-":
            tokens.append(_Token("sign", ch, i, ch))
        elif ch in "(),":
            tokens.append(_Token(ch, ch, i, ch))
        else:
            raise _error(text, f"unexpected character {ch!r}", i)
        i += 1
    tokens.append(_Token("eof", "", n, ""))
    return tokens


# --------------------------------------------------------------------------- predicates


def _constant(value: _Truth) -> _Predicate:
    def constant(props: _Props) -> _Truth:
        return value

    return constant


def _negate(inner: _Predicate) -> _Predicate:
    def negated(props: _Props) -> _Truth:
        value = inner(props)
        return None if value is None else not value

    return negated


def _all(parts: Sequence[_Predicate]) -> _Predicate:
    """SQL AND over a flat list: FALSE wins, then UNKNOWN, else TRUE."""
    parts = tuple(parts)

    def conjunction(props: _Props) -> _Truth:
        unknown = False
        for part in parts:
            value = part(props)
            if value is False:
                return False
            if value is None:
                unknown = True
        return None if unknown else True

    return conjunction


def _any(parts: Sequence[_Predicate]) -> _Predicate:
    """SQL OR over a flat list: TRUE wins, then UNKNOWN, else FALSE."""
    parts = tuple(parts)

    def disjunction(props: _Props) -> _Truth:
        unknown = False
        for part in parts:
            value = part(props)
            if value is True:
                return True
            if value is None:
                unknown = True
        return None if unknown else False

    return disjunction


def _property_vs_constant(
    name: str, convert: Callable[[str], _Scalar | None] | None, test: _Compare, constant: _Scalar
) -> _Predicate:
    if convert is None:

        def string_test(props: _Props) -> _Truth:
            raw = props.get(name)
            return None if raw is None else test(raw, constant)

        return string_test

    def converted_test(props: _Props) -> _Truth:
        raw = props.get(name)
        if raw is None:
            return None
        value = convert(raw)
        return None if value is None else test(value, constant)

    return converted_test


def _property_vs_property(
    left: str, right: str, convert: Callable[[str], _Scalar | None] | None, test: _Compare
) -> _Predicate:
    def pair_test(props: _Props) -> _Truth:
        raw_left, raw_right = props.get(left), props.get(right)
        if raw_left is None or raw_right is None:
            return None
        if convert is None:
            return test(raw_left, raw_right)
        value_left, value_right = convert(raw_left), convert(raw_right)
        if value_left is None or value_right is None:
            return None
        return test(value_left, value_right)

    return pair_test


def _between(name: str, low: int | float, high: int | float, negated: bool) -> _Predicate:
    def between(props: _Props) -> _Truth:
        raw = props.get(name)
        if raw is None:
            return None
        value = _to_number(raw)
        if value is None:
            return None
        return (low <= value <= high) is not negated

    return between


def _in_list(name: str, values: frozenset[str], negated: bool) -> _Predicate:
    def in_list(props: _Props) -> _Truth:
        raw = props.get(name)
        return None if raw is None else (raw in values) is not negated

    return in_list


def _string_test(name: str, test: _Compare, search: str, negated: bool) -> _Predicate:
    if not search:  # RocketMQ: an empty search string never matches, NOT or not
        return _constant(False)

    def string_test(props: _Props) -> _Truth:
        raw = props.get(name)
        return None if raw is None else test(raw, search) is not negated

    return string_test


def _is_null(name: str, negated: bool) -> _Predicate:
    def is_null(props: _Props) -> _Truth:
        return (name not in props) is not negated

    return is_null


_TESTS: Final[dict[str, _Compare]] = {
    "=": operator.eq,
    "<>": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_MIRRORED: Final = {"=": "=", "<>": "<>", ">": "<", ">=": "<=", "<": ">", "<=": ">="}
_ORDERING: Final = frozenset({">", ">=", "<", "<="})
_STRING_TESTS: Final[dict[str, _Compare]] = {
    "CONTAINS": operator.contains,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}
_CONVERTERS: Final[dict[str, Callable[[str], _Scalar | None] | None]] = {
    "number": _to_number,
    "boolean": _to_bool,
    "string": None,
}


# --------------------------------------------------------------------------- parser


@dataclass(frozen=True, slots=True)
class _Operand:
    kind: str  # property string number boolean null
    value: _Scalar | None
    token: _Token


class _Parser:
    """Recursive descent over the token list, building predicates as it goes."""

    def __init__(self, text: str) -> None:
        self._text = text
        if len(text) > MAX_EXPRESSION_LENGTH:
            raise _error(
                text,
                f"the expression is {len(text)} characters long; at most "
                f"{MAX_EXPRESSION_LENGTH} are compiled",
                MAX_EXPRESSION_LENGTH,
            )
        self._tokens = _tokenize(text)
        self._index = 0
        self._depth = 0

    def parse(self) -> _Predicate:
        first = self._peek()
        if first.kind == "eof":
            raise _error(self._text, "the expression is empty; expected a condition", 0)
        predicate = self._or()
        last = self._peek()
        if last.kind != "eof":
            raise self._error(f"unexpected {_describe(last)} after a complete condition", last)
        return predicate

    # -- token helpers

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _next(self) -> _Token:
        token = self._tokens[self._index]
        if token.kind != "eof":
            self._index += 1
        return token

    def _at_keyword(self, *words: str) -> bool:
        token = self._peek()
        return token.kind == "keyword" and token.value in words

    def _error(self, problem: str, token: _Token) -> SubscriptionParseFailedError:
        return _error(self._text, problem, token.pos)

    def _expected(self, what: str, token: _Token) -> SubscriptionParseFailedError:
        if token.kind == "eof":
            return self._error(f"expected {what}", token)
        return self._error(f"expected {what}, found {_describe(token)}", token)

    def _expect(self, kind: str, what: str) -> _Token:
        token = self._next()
        if token.kind != kind:
            raise self._expected(what, token)
        return token

    def _enter(self, token: _Token) -> None:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise self._error(f"parentheses and NOTs nest deeper than {MAX_NESTING}", token)

    # -- grammar

    def _or(self) -> _Predicate:
        parts = [self._and()]
        while self._at_keyword("OR"):
            self._next()
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else _any(parts)

    def _and(self) -> _Predicate:
        parts = [self._not()]
        while self._at_keyword("AND"):
            self._next()
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else _all(parts)

    def _not(self) -> _Predicate:
        if not self._at_keyword("NOT"):
            return self._condition()
        token = self._next()
        self._enter(token)
        inner = self._not()
        self._depth -= 1
        return _negate(inner)

    def _condition(self) -> _Predicate:
        token = self._peek()
        if token.kind == "(":
            self._next()
            self._enter(token)
            inner = self._or()
            self._expect(")", "')'")
            self._depth -= 1
            return inner
        if not _starts_operand(token):
            raise self._expected("a condition", token)
        left = self._operand()
        after = self._peek()
        if after.kind == "cmp":
            self._next()
            return self._comparison(left, str(after.value), self._operand())
        if after.kind == "keyword" and after.value == "IS":
            self._next()
            negated = self._at_keyword("NOT")
            if negated:
                self._next()
            null = self._next()
            if null.kind != "keyword" or null.value != "NULL":
                raise self._expected("NULL after IS" + (" NOT" if negated else ""), null)
            if left.kind == "property":
                return _is_null(str(left.value), negated)
            return _constant((left.kind == "null") is not negated)
        negated = self._at_keyword("NOT")
        if negated:
            self._next()
        keyword = self._peek()
        if keyword.kind == "keyword" and keyword.value in ("BETWEEN", "IN", *_STRING_TESTS):
            self._next()
            name = self._property_name(left, str(keyword.value))
            if keyword.value == "BETWEEN":
                return self._between(name, negated)
            if keyword.value == "IN":
                return self._in(name, negated)
            search = str(self._expect("string", f"a string literal after {keyword.value}").value)
            return _string_test(name, _STRING_TESTS[str(keyword.value)], search, negated)
        if negated:
            raise self._expected("BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT", keyword)
        if left.kind == "boolean":
            return _constant(bool(left.value))
        operators = "=, <>, >, >=, <, <=, BETWEEN, IN, IS, CONTAINS, STARTSWITH or ENDSWITH"
        raise self._expected(f"an operator ({operators}) after {_describe(left.token)}", after)

    def _operand(self) -> _Operand:
        token = self._next()
        if token.kind == "ident":
            return _Operand("property", token.value, token)
        if token.kind == "string":
            return _Operand("string", token.value, token)
        if token.kind == "number":
            return _Operand("number", token.value, token)
        if token.kind == "sign":
            number = self._next()
            if number.kind != "number":
                raise self._expected(f"a number after '{token.value}'", number)
            value = number.value
            assert isinstance(value, int | float)
            signed = -value if token.value == "-" else value
            source = self._text[token.pos : number.pos + len(number.source)]
            return _Operand("number", signed, _Token("number", signed, token.pos, source))
        if token.kind == "keyword" and token.value in ("TRUE", "FALSE"):
            return _Operand("boolean", token.value == "TRUE", token)
        if token.kind == "keyword" and token.value == "NULL":
            return _Operand("null", None, token)
        raise self._expected("a value", token)

    def _property_name(self, left: _Operand, keyword: str) -> str:
        if left.kind != "property":
            raise self._error(f"{keyword} needs a property name on its left", left.token)
        return str(left.value)

    def _comparison(self, left: _Operand, op: str, right: _Operand) -> _Predicate:
        for side in (left, right):
            if side.kind == "null":
                raise self._error(
                    f"cannot compare with NULL using '{op}'; use IS NULL or IS NOT NULL",
                    side.token,
                )
        literal_kinds = {side.kind for side in (left, right)} - {"property"}
        if op in _ORDERING:
            for side in (left, right):
                if side.kind in ("string", "boolean"):
                    raise self._error(
                        f"'{op}' compares numbers only, not the {side.kind} "
                        f"{_describe(side.token)}",
                        side.token,
                    )
            mode = "number"
        elif len(literal_kinds) > 1:
            raise self._error(
                f"cannot compare the {left.kind} {_describe(left.token)} "
                f"with the {right.kind} {_describe(right.token)}",
                right.token,
            )
        else:
            mode = next(iter(literal_kinds), "string")
        convert = _CONVERTERS[mode]
        if left.kind == "property" and right.kind == "property":
            return _property_vs_property(str(left.value), str(right.value), convert, _TESTS[op])
        if left.kind == "property":
            assert right.value is not None
            return _property_vs_constant(str(left.value), convert, _TESTS[op], right.value)
        if right.kind == "property":
            assert left.value is not None
            mirrored = _TESTS[_MIRRORED[op]]
            return _property_vs_constant(str(right.value), convert, mirrored, left.value)
        return _constant(_TESTS[op](left.value, right.value))

    def _between(self, name: str, negated: bool) -> _Predicate:
        low = self._operand()
        if not self._at_keyword("AND"):
            raise self._expected("AND between the BETWEEN bounds", self._peek())
        self._next()
        high = self._operand()
        for bound in (low, high):
            if bound.kind != "number":
                raise self._error(
                    f"BETWEEN bounds must be numbers, not {_describe(bound.token)}", bound.token
                )
        assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
        if low.value > high.value:
            raise self._error(
                f"BETWEEN's lower bound {low.value} is above its upper bound {high.value}",
                low.token,
            )
        return _between(name, low.value, high.value, negated)

    def _in(self, name: str, negated: bool) -> _Predicate:
        self._expect("(", "'(' after IN")
        values = [str(self._expect("string", "a string literal").value)]
        while self._peek().kind == ",":
            self._next()
            values.append(str(self._expect("string", "a string literal").value))
        self._expect(")", "',' or ')'")
        return _in_list(name, frozenset(values), negated)


def _starts_operand(token: _Token) -> bool:
    if token.kind == "keyword":
        return token.value in ("TRUE", "FALSE", "NULL")
    return token.kind in ("ident", "string", "number", "sign")


def _describe(token: _Token) -> str:
    if token.kind == "eof":
        return "the end of the expression"
    if token.kind == "string":
        return token.source
    return f"'{token.source}'"
