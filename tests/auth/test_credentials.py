"""Credentials: signing a request, RocketMQ's JSON form, and where a client finds them."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.credentials import Credentials, load_credentials
from rocketq.auth.signature import compute_signature
from rocketq.remoting.command import RemotingCommand


def test_sign_adds_access_key_then_signature() -> None:
    cmd = RemotingCommand(10, ext={"topic": "T", "queueId": "1"}, body=b"hi")
    Credentials("ak", "sk").sign(cmd)
    assert cmd.ext is not None
    assert cmd.ext["AccessKey"] == "ak"
    assert "SecurityToken" not in cmd.ext
    # Signed bytes: "ak" + "1" + "T" + body, as in test_signature's golden value.
    assert cmd.ext["Signature"] == "0DO+CnanqRktbExDtyMSmi95nwM="


def test_sign_creates_ext_and_signs_the_token() -> None:
    cmd = RemotingCommand(10)
    Credentials("ak", "sk", "tok").sign(cmd)
    assert cmd.ext is not None
    assert cmd.ext["SecurityToken"] == "tok"
    others = {k: v for k, v in cmd.ext.items() if k != "Signature"}
    assert others == {"AccessKey": "ak", "SecurityToken": "tok"}
    assert cmd.ext["Signature"] == compute_signature("sk", {"a": "ak", "b": "tok"}, None)


def test_sign_twice_replaces_the_old_signature() -> None:
    cmd = RemotingCommand(10, ext={"topic": "T"})
    creds = Credentials("ak", "sk")
    creds.sign(cmd)
    first = dict(cmd.ext or {})
    creds.sign(cmd)
    assert cmd.ext == first


def test_repr_hides_the_secret() -> None:
    text = repr(Credentials("ak", "very-secret", "token-x"))
    assert "ak" in text and "very-secret" not in text and "token-x" not in text


def test_empty_halves_are_refused() -> None:
    with pytest.raises(ValueError, match="access key is empty"):
        Credentials("", "sk")
    with pytest.raises(ValueError, match="secret key"):
        Credentials("ak", "")


def test_from_json() -> None:
    creds = Credentials.from_json('{"accessKey": "rocketmq", "secretKey": "12345678"}')
    assert creds == Credentials("rocketmq", "12345678")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not JSON"),
        ("[1]", "must be an object"),
        ('{"accessKey": "a"}', "no secretKey"),
        ('{"secretKey": "s"}', "no accessKey"),
        ('{"accessKey": 1, "secretKey": "s"}', "no accessKey"),
        ('{"accessKey": "a", "secretKey": "s", "securityToken": 3}', "securityToken"),
        ("[" * 100_000, "longer than"),
    ],
)
def test_from_json_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Credentials.from_json(text)


@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_from_json_is_total(text: str) -> None:
    with contextlib.suppress(ValueError):
        Credentials.from_json(text)


def _file(tmp_path: Path, text: str, name: str = "credentials") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nothing_configured_is_none(tmp_path: Path) -> None:
    assert load_credentials(environ={"HOME": str(tmp_path)}) is None


def test_arguments_win_over_env_and_file(tmp_path: Path) -> None:
    path = _file(tmp_path, 'access_key = "f"\nsecret_key = "fs"\n')
    env = {"ROCKETQ_ACCESS_KEY": "e", "ROCKETQ_SECRET_KEY": "es", "HOME": str(tmp_path)}
    found = load_credentials("a", "as", str(path), environ=env)
    assert found == Credentials("a", "as")


def test_env_wins_over_file(tmp_path: Path) -> None:
    path = _file(tmp_path, 'access_key = "f"\nsecret_key = "fs"\n')
    env = {
        "ROCKETQ_ACCESS_KEY": "e",
        "ROCKETQ_SECRET_KEY": "es",
        "ROCKETQ_SECURITY_TOKEN": "et",
        "ROCKETQ_CREDENTIALS_FILE": str(path),
    }
    assert load_credentials(credentials_file=str(path), environ=env) == Credentials("e", "es", "et")


def test_file_from_argument_then_env_then_home(tmp_path: Path) -> None:
    arg = _file(tmp_path, 'access_key = "arg"\nsecret_key = "s"\n', "arg.toml")
    env_file = _file(tmp_path, 'access_key = "env"\nsecret_key = "s"\n', "env.toml")
    home = tmp_path / "home"
    (home / ".rocketq").mkdir(parents=True)
    _file(home / ".rocketq", 'access_key = "home"\nsecret_key = "s"\nsecurity_token = "t"\n')
    env = {"ROCKETQ_CREDENTIALS_FILE": str(env_file), "HOME": str(home)}
    assert load_credentials(credentials_file=str(arg), environ=env) == Credentials("arg", "s")
    assert load_credentials(environ=env) == Credentials("env", "s")
    assert load_credentials(environ={"HOME": str(home)}) == Credentials("home", "s", "t")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("a", None), {}, "the arguments gives an access key but no secret key"),
        ((None, "s"), {}, "the arguments gives a secret key but no access key"),
        ((None, None), {"ROCKETQ_ACCESS_KEY": "a"}, "ROCKETQ_SECRET_KEY.*no secret key"),
        ((None, None), {"ROCKETQ_SECRET_KEY": "s"}, "no access key"),
    ],
)
def test_half_a_pair_is_an_error(
    tmp_path: Path, args: tuple[str | None, str | None], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_credentials(*args, environ={"HOME": str(tmp_path), **env})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('access_key = "a"\n', "gives an access key but no secret key"),
        ('secret_key = "s"\n', "gives a secret key but no access key"),
        ("", "has no access_key and secret_key"),
        ("access_key = [1]\n", "access_key must be a string"),
        ("access_key = \n", "is not TOML"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        load_credentials(credentials_file=str(path), environ={})
    assert str(path) in str(info.value)


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match="cannot read the credentials file"):
        load_credentials(credentials_file=str(missing), environ={})
    with pytest.raises(ValueError, match=str(missing)):
        load_credentials(environ={"ROCKETQ_CREDENTIALS_FILE": str(missing)})
