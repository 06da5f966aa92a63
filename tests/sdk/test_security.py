"""Client credentials and TLS: how every client resolves ``access_key`` / ``secret_key`` /
``credentials_file`` (arguments, environment, file) and its TLS files, the errors a bad
setting gives at construction, and, against a real loopback server checking signatures as
RocketMQ's ACL does, that every request to a nameserver and a broker is signed, a wrong
secret is refused as NoPermissionError, and TLS connects with a CA file."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketq import Admin, Producer, PullConsumer, PushConsumer
from rocketq.auth.signature import ACCESS_KEY, SIGNATURE, compute_signature, signatures_match
from rocketq.common.exceptions import (
    ConfigError,
    NoNameServerError,
    NoPermissionError,
)
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import BrokerData, ClusterInfo, cluster_info_body
from rocketq.remoting.tls import ServerTls
from rocketq.remoting.transport import Connection, RemotingServer
from rocketq.sdk import auth_wire as auw
from rocketq.sdk.consumer_config import ConsumerConfig, PullConsumerConfig
from rocketq.sdk.producer import ProducerConfig
from rocketq.sdk.security import SECURITY_SETTINGS, SecurityConfig, client_security
from tests.remoting.tls_certs import Certs, make_certs

NAMESRV = "127.0.0.1:1"  # never connected to by the construction tests
ENV = (
    "ROCKETQ_ACCESS_KEY",
    "ROCKETQ_SECRET_KEY",
    "ROCKETQ_SECURITY_TOKEN",
    "ROCKETQ_CREDENTIALS_FILE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials from the machine running the tests: no variables, an empty home."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _signed_as(client: object) -> tuple[str, str] | None:
    """(access key, signature) a client's broker connections put on a request; None when
    they do not sign."""
    remoting = client.client.brokers.remoting  # type: ignore[attr-defined]
    security = remoting.security
    if security is None or security.sign is None:
        return None
    cmd = RemotingCommand(RequestCode.HEART_BEAT, {"a": "1"}, b"body")
    security.sign(cmd)
    assert cmd.ext is not None
    return cmd.ext[ACCESS_KEY], cmd.ext[SIGNATURE]


def _signature(secret: str) -> str:
    return compute_signature(secret, {"a": "1", ACCESS_KEY: "ak"}, b"body")


# -- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ProducerConfig, ConsumerConfig, PullConsumerConfig])
def test_every_client_config_has_the_security_settings(cls: type) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    assert set(SECURITY_SETTINGS) <= names
    config = cls(access_key="ak", secret_key="very-secret")
    assert "very-secret" not in repr(config)


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: Producer("pg", NAMESRV, **kw),
        lambda **kw: PushConsumer("cg", NAMESRV, **kw),
        lambda **kw: PullConsumer("cg", NAMESRV, **kw),
        lambda **kw: Admin(NAMESRV, **kw),
    ],
    ids=["Producer", "PushConsumer", "PullConsumer", "Admin"],
)
def test_arguments_sign_brokers_and_nameservers(make: object) -> None:
    client = make(access_key="ak", secret_key="sk")  # type: ignore[operator]
    assert _signed_as(client) == ("ak", _signature("sk"))
    ns_security = client.client.nameserver.remoting.security
    assert ns_security is client.client.brokers.remoting.security
    assert ns_security.ssl is None


def test_without_credentials_nothing_signs() -> None:
    producer = Producer("pg", NAMESRV)
    assert producer.client.brokers.remoting.security is None
    assert producer.client.nameserver.remoting.security is None


def test_environment_gives_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", "ak")
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", "env-secret")
    assert _signed_as(Producer("pg", NAMESRV)) == ("ak", _signature("env-secret"))
    assert _signed_as(Admin(NAMESRV)) == ("ak", _signature("env-secret"))


def test_arguments_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", "other")
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", "other-secret")
    assert _signed_as(Producer("pg", NAMESRV, access_key="ak", secret_key="sk")) == (
        "ak",
        _signature("sk"),
    )


def test_credentials_file_setting_env_and_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    named = tmp_path / "creds.toml"
    named.write_text('access_key = "ak"\nsecret_key = "file-secret"\n')
    assert _signed_as(PushConsumer("cg", NAMESRV, credentials_file=str(named))) == (
        "ak",
        _signature("file-secret"),
    )
    monkeypatch.setenv("ROCKETQ_CREDENTIALS_FILE", str(named))
    assert _signed_as(PullConsumer("cg", NAMESRV)) == ("ak", _signature("file-secret"))
    monkeypatch.delenv("ROCKETQ_CREDENTIALS_FILE")
    home = Path(str(tmp_path / "home"))
    (home / ".rocketq").mkdir()
    (home / ".rocketq" / "credentials").write_text('access_key = "ak"\nsecret_key = "home"\n')
    assert _signed_as(Admin(NAMESRV)) == ("ak", _signature("home"))


def test_half_a_pair_names_the_missing_half() -> None:
    with pytest.raises(ConfigError, match=r"Producer: .*access key but no secret key"):
        Producer("pg", NAMESRV, access_key="ak")
    with pytest.raises(ConfigError, match=r"Admin: .*secret key but no access key"):
        Admin(NAMESRV, secret_key="sk")


def test_unreadable_credentials_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PushConsumer: cannot read the credentials file"):
        PushConsumer("cg", NAMESRV, credentials_file=str(tmp_path / "absent"))
    bad = tmp_path / "bad"
    bad.write_text("access_key = \n")
    with pytest.raises(ConfigError, match="not TOML"):
        PullConsumer("cg", NAMESRV, credentials_file=str(bad))


def test_missing_ca_file_fails_at_construction(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    for make in (
        lambda: Producer("pg", NAMESRV, tls=True, tls_ca_file=str(missing)),
        lambda: Admin(NAMESRV, tls=True, tls_ca_file=str(missing)),
    ):
        with pytest.raises(ConfigError, match=r"tls_ca_file '.*nope\.pem' does not exist"):
            make()


def test_ca_file_that_is_not_a_certificate(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError, match="Producer: the TLS files do not load"):
        Producer("pg", NAMESRV, tls=True, tls_ca_file=str(junk))


def test_tls_files_without_tls_are_refused(certs: Certs) -> None:
    with pytest.raises(ConfigError, match="tls_ca_file set but tls is off"):
        Producer("pg", NAMESRV, tls_ca_file=certs.ca)


def test_client_certificate_needs_its_key(certs: Certs) -> None:
    client = certs.issue("half", common_name="half")
    with pytest.raises(ConfigError, match="both tls_cert_file and tls_key_file"):
        Admin(NAMESRV, tls=True, tls_ca_file=certs.ca, tls_cert_file=client.cert)


def test_tls_context_from_settings(certs: Certs) -> None:
    admin = Admin(NAMESRV, tls=True, tls_ca_file=certs.ca, tls_verify_hostname=False)
    context = admin.client.brokers.remoting.security.ssl
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is False
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert admin.client.brokers.remoting.security.sign is None
    security = client_security(SecurityConfig(tls=True, tls_ca_file=certs.ca), "x")
    assert security is not None and security.ssl is not None and security.ssl.check_hostname


def test_trace_producer_signs_as_its_client() -> None:
    producer = Producer("pg", NAMESRV, access_key="ak", secret_key="sk", enable_trace=True)
    from rocketq.sdk.security import security_settings

    assert security_settings(producer.config)["secret_key"] == "sk"


# -- against a server that checks signatures ----------------------------------------------


class CheckingServer:
    """A nameserver and broker in one: it checks every request's signature as RocketMQ's
    ACL does (a refusal is NO_PERMISSION) and answers cluster info (itself, as the one
    master of ``DefaultCluster``), the topic list, and the user and ACL requests."""

    def __init__(self, users: dict[str, str], tls: ServerTls | None = None) -> None:
        self.users = users
        self.seen: list[RemotingCommand] = []
        self.refused: list[int] = []
        handlers = {
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topics,
            RequestCode.AUTH_CREATE_USER: self._ok,
            RequestCode.AUTH_GET_USER: self._get_user,
            RequestCode.AUTH_LIST_ACL: self._list_acl,
            RequestCode.AUTH_DELETE_ACL: self._ok,
        }
        self.server = RemotingServer(handlers, access=self._check, tls=tls)
        self.addr = ""

    def _check(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        ext = cmd.ext or {}
        secret = self.users.get(ext.get(ACCESS_KEY, ""))
        given = ext.get(SIGNATURE, "")
        if secret is None or not signatures_match(compute_signature(secret, ext, cmd.body), given):
            self.refused.append(cmd.code)
            return cmd.response(ResponseCode.NO_PERMISSION, remark="signature check failed")
        self.seen.append(cmd)
        return None

    def _cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        info = ClusterInfo(
            {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: self.addr})},
            {"DefaultCluster": ["broker-a"]},
        )
        return cmd.response(ResponseCode.SUCCESS, body=cluster_info_body(info))

    def _topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=b'{"topicList":["Orders"]}')

    def _ok(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS)

    def _get_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        name = (cmd.ext or {}).get("username", "")
        body = f'{{"username":"{name}","userType":"Normal","userStatus":"enable"}}'
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())

    def _list_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        body = (
            b'[{"subject":"User:alice","policies":[{"policyType":"Custom","entries":'
            b'[{"resource":"Topic:orders","actions":["Pub","Sub"],"sourceIps":["10.0.0.0/8"],'
            b'"decision":"Allow"}]}]}]'
        )
        return cmd.response(ResponseCode.SUCCESS, body=body)

    async def __aenter__(self) -> CheckingServer:
        port = await self.server.start("127.0.0.1", 0)
        self.addr = f"127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()


@pytest.fixture
async def server() -> AsyncIterator[CheckingServer]:
    async with CheckingServer({"admin": "admin-secret"}) as s:
        yield s


async def test_every_request_to_nameserver_and_broker_is_signed(server: CheckingServer) -> None:
    async with Admin(server.addr, access_key="admin", secret_key="admin-secret") as admin:
        assert await admin.topic_list() == ["Orders"]
        targets = await admin.create_user("alice", "alice-secret", cluster="DefaultCluster")
        assert targets == [server.addr]
        user = await admin.get_user("alice")
        acls = await admin.list_acls()
    assert server.refused == []
    codes = [cmd.code for cmd in server.seen]
    assert codes == [
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.AUTH_CREATE_USER,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.AUTH_GET_USER,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.AUTH_LIST_ACL,
    ]
    create = server.seen[2]
    assert create.ext is not None and create.ext["username"] == "alice"
    assert fastjson.loads(bytes(create.body or b"")) == {
        "username": "alice",
        "password": "alice-secret",
        "userType": "Normal",
    }
    assert user == auw.UserInfo("alice", "", "Normal", "enable")
    assert acls == [
        auw.AclInfo(
            "User:alice",
            (
                auw.PolicyInfo(
                    "Custom",
                    (
                        auw.PolicyEntryInfo(
                            "Topic:orders", ("Pub", "Sub"), ("10.0.0.0/8",), "Allow"
                        ),
                    ),
                ),
            ),
        )
    ]


async def test_wrong_secret_is_no_permission(server: CheckingServer) -> None:
    async with Admin(server.addr, access_key="admin", secret_key="wrong") as admin:
        with pytest.raises(NoPermissionError, match="signature check failed") as refused:
            await admin.delete_acl("User:alice", broker_addr=server.addr)
        assert "no credentials" not in str(refused.value)
        with pytest.raises(NoPermissionError):
            await admin.client.nameserver.cluster_info()
    assert server.seen == []
    assert server.refused == [RequestCode.AUTH_DELETE_ACL, RequestCode.GET_BROKER_CLUSTER_INFO]


async def test_unsigned_requests_are_refused_with_a_hint(server: CheckingServer) -> None:
    async with Admin(server.addr) as admin:
        with pytest.raises(NoPermissionError, match="this client sends no credentials") as broker:
            await admin.get_user("alice", broker_addr=server.addr)
        with pytest.raises(NoPermissionError, match="set ROCKETQ_ACCESS_KEY and") as nameserver:
            await admin.topic_list()
    assert "signature check failed" in str(broker.value)
    assert "signature check failed" in str(nameserver.value)
    assert server.refused == [
        RequestCode.AUTH_GET_USER,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    ]


async def test_tls_with_a_ca_file(certs: Certs) -> None:
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key)
    async with CheckingServer({"admin": "s"}, tls=tls) as server:
        async with Admin(
            server.addr, access_key="admin", secret_key="s", tls=True, tls_ca_file=certs.ca
        ) as admin:
            assert await admin.topic_list() == ["Orders"]
            user = await admin.get_user("bob", cluster="DefaultCluster")
            assert user is not None and user.username == "bob"
        # Plaintext against an enforcing port: the connection is closed, never answered.
        async with Admin(server.addr, access_key="admin", secret_key="s", timeout=2.0) as plain:
            with pytest.raises(NoNameServerError):
                await plain.topic_list()
        # A CA that did not sign the server's certificate: the handshake fails.
        other = make_certs(Path(certs.directory) / "other", "other")
        async with Admin(
            server.addr, access_key="admin", secret_key="s", tls=True, tls_ca_file=other.ca
        ) as stranger:
            with pytest.raises(NoNameServerError):
                await stranger.topic_list()
    assert len(server.seen) == 3
