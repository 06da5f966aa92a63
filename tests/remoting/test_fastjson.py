"""fastjson's JSON dialect: bare number keys and object keys, read and written, and clear
errors for malformed input."""

from __future__ import annotations

import json

import pytest

from rocketq.remoting.fastjson import (
    MAX_DEPTH,
    FastjsonDecodeError,
    ObjectKey,
    dumps,
    loads,
    too_deep,
)

MQ_A0 = ObjectKey.of({"brokerName": "a", "queueId": 0, "topic": "T"})
MQ_A1 = ObjectKey.of({"brokerName": "a", "queueId": 1, "topic": "T"})


def test_number_keys_as_fastjson_writes_broker_addrs() -> None:
    text = '{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}'
    assert loads(text) == {"brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}
    assert dumps(loads(text)) == text.encode()


def test_object_keys_as_fastjson_writes_an_offset_table() -> None:
    text = (
        '{"offsetTable":{{"brokerName":"a","queueId":0,"topic":"T"}:'
        '{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":0}}}'
    )
    table = loads(text)["offsetTable"]
    assert table == {MQ_A0: {"brokerOffset": 5, "consumerOffset": 3, "lastTimestamp": 0}}
    key = next(iter(table))
    assert isinstance(key, ObjectKey) and isinstance(key, tuple)
    assert key == (("brokerName", "a"), ("queueId", 0), ("topic", "T"))
    assert key.as_dict() == {"brokerName": "a", "queueId": 0, "topic": "T"}
    assert key.get("queueId") == 0 and key.get("nope", -1) == -1
    assert dumps(loads(text)) == text.encode()


def test_object_key_sorts_fields_and_freezes_nested_values() -> None:
    key = ObjectKey.of({"topic": "T", "tags": ["x", "y"], "sub": {"b": 1, "a": [{"z": 0}]}})
    assert [name for name, _ in key] == ["sub", "tags", "topic"]
    same = ObjectKey.of({"sub": {"a": [{"z": 0}], "b": 1}, "tags": ("x", "y"), "topic": "T"})
    assert key == same and hash(key) == hash(same)
    assert key.as_dict() == {"sub": {"a": [{"z": 0}], "b": 1}, "tags": ["x", "y"], "topic": "T"}
    assert dumps({key: 1}) == b'{{"sub":{"a":[{"z":0}],"b":1},"tags":["x","y"],"topic":"T"}:1}'


def test_nested_bare_keys_inside_arrays_and_objects() -> None:
    text = (
        '{"list":[{"mqTable":{{"brokerName":"a","queueId":1,"topic":"T"}:{"locked":true}}},'
        '{7:[1,2,{-3:null}]}],"plain":{"x":{}},"empty":[]}'
    )
    value = loads(text)
    assert value == {
        "list": [{"mqTable": {MQ_A1: {"locked": True}}}, {7: [1, 2, {-3: None}]}],
        "plain": {"x": {}},
        "empty": [],
    }
    assert dumps(value) == text.encode()


def test_object_key_whose_fields_hold_objects_and_arrays() -> None:
    text = '{{"a":{"b":[1,{"c":2}]},"d":"e"}:"v"}'
    value = loads(text)
    (key,) = value
    assert key.as_dict() == {"a": {"b": [1, {"c": 2}]}, "d": "e"}
    assert dumps(value) == text.encode()


def test_strings_with_escapes_and_unicode() -> None:
    original = {"s": 'q"b\\s/ \b\f\n\r\t \x01 é 中文 \U0001f600', 1: "топик"}
    text = dumps(original)
    assert "中文".encode() in text and "\U0001f600".encode() in text
    assert loads(text) == original
    escaped = r'{1:"\u00e9\u4e2d\ud83d\ude00\"\\\/\b\f\n\r\t"}'
    assert loads(escaped) == {1: 'é中\U0001f600"\\/\b\f\n\r\t'}
    assert loads(escaped.encode()) == loads(escaped)
    # A lone surrogate is refused: no UTF-8 could carry it on (in a response, a file...).
    for lone in (r'{1:"\ud800x"}', r'["\udc00"]', r'{"\uDBFF":1}'):
        with pytest.raises(FastjsonDecodeError, match="lone surrogate"):
            loads(lone)
    assert loads(r'["\\ud800"]') == ["\\ud800"]  # an escaped backslash, then text


def test_numbers() -> None:
    text = "{0:0,-1:-1,2:12345678901234567890,3:1.5,4:-2.5e-3,5:1E+2,6:0.0}"
    assert loads(text) == {
        0: 0,
        -1: -1,
        2: 12345678901234567890,
        3: 1.5,
        4: -0.0025,
        5: 100.0,
        6: 0.0,
    }
    assert isinstance(loads("{1:1.0}")[1], float) and isinstance(loads("{1:10}")[1], int)
    assert dumps({1.5: 2, 3: 4.25, 5: float("nan"), 6: float("inf")}) == (
        b"{1.5:2,3:4.25,5:null,6:null}"
    )


def test_true_false_null_as_values_and_keys() -> None:
    assert loads("{1:true,2:false,3:null}") == {1: True, 2: False, 3: None}
    assert loads("{true:1,null:2}") == {True: 1, None: 2}
    assert dumps({True: 1, None: 2, "k": [True, False, None]}) == (
        b'{true:1,null:2,"k":[true,false,null]}'
    )


def test_standard_json_takes_the_fast_path_and_matches_json() -> None:
    text = '{"clientID":"127.0.0.1@1","producerDataSet":[{"groupName":"pg"}],"n":[1.5,null]}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)
    assert loads("[]") == [] and loads('"x"') == "x" and loads(" 3 ") == 3


def test_dumps_is_compact_and_keeps_order() -> None:
    value = {"z": 1, "a": {"y": [1, 2], "b": "c"}, "set": ("t",)}
    assert dumps(value) == b'{"z":1,"a":{"y":[1,2],"b":"c"},"set":["t"]}'
    assert dumps("é") == '"é"'.encode()
    assert dumps([]) == b"[]" and dumps({}) == b"{}"


def test_dumps_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(TypeError, match="bytes"):
        dumps({"body": b"raw"})
    with pytest.raises(TypeError, match="object key"):
        dumps({("a", "b"): 1})


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        ("", 0, "end of the input"),
        ("{1:", 3, "end of the input"),
        ("{1 2}", 3, "expecting ':'"),
        ('{1:"a" 2:"b"}', 7, "expecting ',' or '}'"),
        ('{1:"a",}', 7, "'}' after ','"),
        ("{1:[1,2}", 7, "expecting ',' or ']'"),
        ("{1:[1,]}", 6, "']' after ','"),
        ('{1:"abc}', 3, "unterminated string"),
        ('{1:"a\\x"}', 5, "invalid escape"),
        ('{1:"\\u12g4"}', 4, "4 hex digits"),
        ('{1:"a\nb"}', 5, "control character"),
        ("{1:tru}", 3, "expecting a value"),
        ("{1:-}", 3, "malformed number"),
        ("{[1]:2}", 1, "array cannot be an object key"),
        ("{1:2}}", 5, "extra data"),
        ("{1:2} x", 6, "extra data"),
    ],
)
def test_malformed_input_names_the_position(text: str, position: int, words: str) -> None:
    with pytest.raises(FastjsonDecodeError) as caught:
        loads(text)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.pos == position, str(error)
    assert words in str(error) and f"(char {position})" in str(error)


def test_malformed_input_reports_line_and_column() -> None:
    with pytest.raises(ValueError, match=r"line 3 column 5 \(char 13\)"):
        loads("{1:\n  2,\n  3 4}")


def test_bytes_that_are_not_utf8() -> None:
    with pytest.raises(ValueError, match=r"not UTF-8.*position 4"):
        loads(b'{1:"\xff"}')


def test_too_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = "{1:" * 300 + "0" + "}" * 300
    with pytest.raises(FastjsonDecodeError, match="nesting deeper"):
        loads(deep)
    nested: list[object] = []
    for _ in range(300):
        nested = [nested]
    with pytest.raises(ValueError, match="nesting deeper"):
        dumps(nested)


@pytest.mark.parametrize("kind", ["standard", "bare keys"])
def test_nesting_up_to_the_limit_parses_and_one_more_is_refused(kind: str) -> None:
    def nested(depth: int) -> str:
        if kind == "standard":
            return '{"a":' * (depth - 1) + "[]" + "}" * (depth - 1)
        return "{1:" * (depth - 1) + "[]" + "}" * (depth - 1)

    value = loads(nested(MAX_DEPTH))
    for _ in range(MAX_DEPTH - 1):
        value = value["a" if kind == "standard" else 1]
    assert value == []
    for depth in (MAX_DEPTH + 1, 50_000):
        with pytest.raises(FastjsonDecodeError, match=f"nesting deeper than {MAX_DEPTH}"):
            loads(nested(depth))


def test_brackets_in_strings_do_not_count_as_nesting() -> None:
    text = '["' + "[{" * 1000 + '", "\\"[", {"k\\\\": "]]]"}, "\\\\"]'
    assert loads(text) == ["[{" * 1000, '"[', {"k\\": "]]]"}, "\\"]
    assert not too_deep(text) and not too_deep(text.encode())
    assert too_deep("[" * 3 + '"x"' + "]" * 3, 2) and not too_deep('[["[["]]', 2)


def test_a_number_too_long_for_int_is_an_error_with_its_position() -> None:
    digits = "9" * 5000
    for text in (f"[{digits}]", f"{{1:{digits}}}"):
        with pytest.raises(FastjsonDecodeError, match="a number of 5000 digits") as caught:
            loads(text)
        assert caught.value.pos == text.index("9")


def test_an_object_key_with_names_equal_as_text_keeps_the_later_field() -> None:
    """{0: ..., "0": ...} as a key: one field "0" (the later value), never a comparison of
    values of different types (once a TypeError, found by the route_body fuzz harness)."""
    doc = loads('[{{"0":{0:"10"},0:"10ui"}:1}]')
    ((key, value),) = doc[0].items()
    assert key == ObjectKey.of({"0": "10ui"}) and value == 1
    assert ObjectKey.of({"b": 1, "a": {"x": 1}}).as_dict() == {"a": {"x": 1}, "b": 1}
