"""Request signatures: the bytes RocketMQ 4.x clients sign, and the signature they send."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.signature import (
    UNIQUE_MSG_QUERY_FLAG,
    compute_signature,
    hmac_sha1_base64,
    signature_content,
    signatures_match,
)
from tests.system_deps import require_command, unavailable

ALI_ONS = Path(__file__).resolve().parents[1] / "conformance" / "ali_ons"


def test_values_in_key_order_then_the_body() -> None:
    ext = {"topic": "T", "AccessKey": "ak", "queueId": "1", "Signature": "old"}
    # Sorted keys: AccessKey, (Signature skipped), queueId, topic.
    assert signature_content(ext, b"hi") == b"ak1Thi"


def test_golden_signature() -> None:
    # printf 'ak1Thi' | openssl dgst -sha1 -hmac sk -binary | base64
    ext = {"topic": "T", "AccessKey": "ak", "queueId": "1"}
    assert hmac_sha1_base64("sk", signature_content(ext, b"hi")) == "0DO+CnanqRktbExDtyMSmi95nwM="
    assert compute_signature("sk", ext, b"hi") == "0DO+CnanqRktbExDtyMSmi95nwM="
    assert compute_signature("sk", ext, memoryview(b"hi")) == "0DO+CnanqRktbExDtyMSmi95nwM="


def test_java_string_order_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which Java sorts before U+FF61
    # (code point order would put U+FF61 first).
    ext = {"AccessKey": "AK", "\uff61": "\uff61", "\U0001f600": "\U0001f600"}
    content = signature_content(ext, None)
    assert content == b"AK" + "\U0001f600".encode() + "\uff61".encode()
    # printf 'AK\xf0\x9f\x98\x80\xef\xbd\xa1' | openssl dgst -sha1 -hmac 'sécret' -binary | base64
    assert compute_signature("sécret", ext, None) == "28YtVD0Ks4biLFltrS74BBZTDko="


def test_uppercase_keys_sort_before_lowercase() -> None:
    assert signature_content({"b": "2", "a": "1", "B": "3", "A": "4"}, b"") == b"4312"


def test_body_appended_raw_and_empty_body_adds_nothing() -> None:
    ext = {"k": "v"}
    body = bytes(range(256))
    assert signature_content(ext, body) == b"v" + body
    assert signature_content(ext, b"") == b"v"
    assert signature_content(ext, None) == b"v"
    assert signature_content({}, body) == body


def test_security_token_is_signed_like_any_field() -> None:
    ext = {"AccessKey": "ak", "SecurityToken": "tok", "topic": "T"}
    assert signature_content(ext, None) == b"aktokT"


def test_skip_leaves_out_fields() -> None:
    ext = {"AccessKey": "ak", UNIQUE_MSG_QUERY_FLAG: "true", "Signature": "s", "topic": "T"}
    assert signature_content(ext, None) == b"aktrueT"
    skip = ("Signature", UNIQUE_MSG_QUERY_FLAG)
    assert signature_content(ext, None, skip=skip) == b"akT"


def test_lone_surrogates_encode_as_java_does() -> None:
    # Java's getBytes(UTF_8) writes '?' for a lone surrogate and joins a split pair.
    assert signature_content({"a": "x\ud800y"}, None) == b"x?y"
    assert signature_content({"a": "\ud83d", "b": "\ude00"}, None) == "\U0001f600".encode()


def test_signatures_match_compares_exactly() -> None:
    assert signatures_match("abc=", "abc=")
    assert not signatures_match("abc=", "abd=")
    assert not signatures_match("abc=", "")
    assert not signatures_match("abc=", "abc=\ud800")


ext_dicts = st.dictionaries(st.text(max_size=12), st.text(max_size=24), max_size=8)
bodies = st.none() | st.binary(max_size=256)


@given(ext_dicts, bodies, st.text(st.characters(exclude_categories=("Cs",)), max_size=16))
def test_signature_content_never_raises(
    ext: dict[str, str], body: bytes | None, secret: str
) -> None:
    content = signature_content(ext, body)
    assert content.endswith(body or b"")
    expected = base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()
    assert compute_signature(secret, ext, body) == expected
    assert hmac_sha1_base64(secret, content) == expected


@given(st.dictionaries(st.from_regex(r"[A-Za-z_]{1,10}", fullmatch=True), st.text(max_size=10)))
def test_ascii_keys_order_is_plain_sort(ext: dict[str, str]) -> None:
    expected = "".join(ext[k] for k in sorted(ext) if k != "Signature")
    assert signature_content(ext, None) == expected.encode("utf-8", "replace")


def test_same_signature_as_the_ali_ons_client() -> None:
    """Run ali-ons's own ``Channel.beforeRequest`` (the stock 4.x Node client) on a command
    and check that the signature it adds is the one we compute from its ext fields."""
    node = require_command("node", package="nodejs")
    channel = ALI_ONS / "node_modules" / "ali-ons" / "lib" / "channel.js"
    if not channel.exists():
        unavailable("ali-ons is not installed; run `npm ci --prefix tests/conformance/ali_ons`")
    script = """
const Channel = require(process.argv[1]);
const header = {
  topic: 'TopicTest', queueId: 3, producerGroup: 'pg',
  properties: 'a\\u0001b\\u0002', 'z\\u00e9': 'caf\\u00e9',
};
const ext = {};
for (const k in header) ext[k] = header[k].toString();
const command = {
  customHeader: header,
  extFields: ext,
  body: Buffer.from([0, 1, 2, 255, 104, 105]),
};
const self = {accessKey: 'rocketmq2', secretKey: '12345678', onsChannel: 'ALIYUN'};
Channel.prototype.beforeRequest.call(self, command);
process.stdout.write(JSON.stringify(command.extFields));
"""
    done = subprocess.run(
        [node, "-e", script, str(channel)], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    ext = json.loads(done.stdout)
    assert ext["AccessKey"] == "rocketmq2" and ext["OnsChannel"] == "ALIYUN"
    body = bytes([0, 1, 2, 255, 104, 105])
    assert compute_signature("12345678", ext, body) == ext["Signature"]
    assert compute_signature("12345678x", ext, body) != ext["Signature"]
