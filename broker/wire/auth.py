"""Users and ACL policies over the wire (RocketMQ 5.3's AUTH_* request codes, which
mqadmin's ``createUser``, ``updateAcl``... send), and a replica's copy of them.

Headers and bodies are RocketMQ's: ``username`` with a UserInfo body
(``{"username", "password", "userType", "userStatus"}``), ``subject`` with an AclInfo body
(``{"subject", "policies": [{"policyType", "entries": [{"resource", "actions",
"sourceIps", "decision"}]}]}``), ``subject``/``policyType``/``resource`` to delete a policy
entry, ``filter``, ``subjectFilter`` and ``resourceFilter`` for the lists. A user's
password is never sent back (RocketMQ's answers carry it; rocketq's leave it out).

Who may call these is decided before a handler runs (``auth/request_map.py``: Update or
Get on the cluster); on top of that, as RocketMQ does, only a super user may create, make
or delete a super user. A change is made on the master (or the Raft leader): a replica
refuses it and copies its master's users and policies instead (GET_AUTH_METADATA, rocketq's
own code, asked by ``broker/slave_sync.py``). A change takes effect at the next request.
"""

from __future__ import annotations

from typing import Final

from rocketq.auth.metadata import AuthMetadata, AuthMetadataError
from rocketq.auth.model import (
    PolicyType,
    Resource,
    UserInfo,
    UserType,
    decode_acl_info,
    decode_user_info,
    encode_acl_info,
    encode_acl_infos,
    encode_user_info,
    encode_user_infos,
)
from rocketq.broker.request_host import RequestHost
from rocketq.common.exceptions import NoPermissionError, RocketqSystemError
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler

# RocketMQ's ResponseCode.INVALID_PARAMETER: a blank name, a body that is not a UserInfo or
# an AclInfo, a change RocketMQ's rules refuse.
INVALID_PARAMETER: Final = 29


class AuthRequests:
    """The AUTH_* handlers of one broker, over its users and ACL policies."""

    def __init__(self, broker: RequestHost, metadata: AuthMetadata) -> None:
        self.b = broker
        self.metadata = metadata

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.AUTH_CREATE_USER: self.create_user,
            RequestCode.AUTH_UPDATE_USER: self.update_user,
            RequestCode.AUTH_DELETE_USER: self.delete_user,
            RequestCode.AUTH_GET_USER: self.get_user,
            RequestCode.AUTH_LIST_USER: self.list_users,
            RequestCode.AUTH_CREATE_ACL: self.create_acl,
            RequestCode.AUTH_UPDATE_ACL: self.update_acl,
            RequestCode.AUTH_DELETE_ACL: self.delete_acl,
            RequestCode.AUTH_GET_ACL: self.get_acl,
            RequestCode.AUTH_LIST_ACL: self.list_acls,
            RocketqRequestCode.GET_AUTH_METADATA: self.snapshot,
        }

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def _invalid(cmd: RemotingCommand, why: str) -> RemotingCommand:
        return cmd.response(INVALID_PARAMETER, remark=why)

    def _on_writer(self) -> None:
        """Changes are made where the group's writes are: a replica copies them."""
        if self.b.config.broker_role == "SLAVE":
            raise RocketqSystemError(
                f"broker {self.b.config.broker_name} id {self.b.config.broker_id} is a "
                "replica: change users and ACLs on its master (or Raft leader), which its "
                "replicas copy"
            )

    def _caller_is_super(self, conn: Connection, cmd: RemotingCommand) -> bool:
        """Whether the request comes from a super user: with authentication off (no
        AccessKey) anyone is, as in RocketMQ; the inner credentials are. The sender is the
        request's AccessKey, else the one remembered on its connection (a keyless request
        of an authentication session)."""
        access_key = (cmd.ext or {}).get("AccessKey", "")
        access = self.b.security.access
        if not access_key and access is not None and access.stateful_seconds:
            access_key = access.remembered_name(conn.attrs) or ""
        if not access_key:
            return not self.b.config.authentication_enabled
        inner = self.b.inner_credentials
        if inner is not None and access_key == inner.access_key:
            return True
        user = self.metadata.get_user(access_key)
        return user is not None and user.is_super

    def _need_super(self, conn: Connection, cmd: RemotingCommand, what: str) -> None:
        if not self._caller_is_super(conn, cmd):
            raise NoPermissionError(f"only a super user may {what}")

    @staticmethod
    def _name(cmd: RemotingCommand, field: str) -> str:
        value = (cmd.ext or {}).get(field, "").strip()
        if not value:
            raise AuthMetadataError(f"the {field} is blank")
        return value

    # -- users ---------------------------------------------------------------------------

    def create_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            self._on_writer()
            username = self._name(cmd, "username")
            info = decode_user_info(cmd.body or b"{}")
            user = UserInfo(username, info.password, info.user_type, info.user_status).to_user()
            if user.is_super:
                self._need_super(conn, cmd, f"create the super user {username!r}")
            self.metadata.create_user(user)
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def update_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            self._on_writer()
            username = self._name(cmd, "username")
            info = decode_user_info(cmd.body or b"{}")
            old = self.metadata.get_user(username)
            if old is None:
                raise AuthMetadataError(f"user {username!r} does not exist")
            if old.is_super or info.user_type is UserType.SUPER:
                self._need_super(conn, cmd, f"change the super user {username!r}")
            self.metadata.update_user(
                username,
                password=info.password,
                user_type=info.user_type,
                user_status=info.user_status,
            )
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def delete_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            self._on_writer()
            username = self._name(cmd, "username")
            old = self.metadata.get_user(username)
            if old is not None and old.is_super:
                self._need_super(conn, cmd, f"delete the super user {username!r}")
            self.metadata.delete_user(username)
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def get_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            username = self._name(cmd, "username")
        except AuthMetadataError as exc:
            return self._invalid(cmd, str(exc))
        user = self.metadata.get_user(username)
        body = encode_user_info(user, with_password=False) if user is not None else None
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def list_users(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        users = self.metadata.list_users((cmd.ext or {}).get("filter", ""))
        body = encode_user_infos(users, with_password=False) if users else None
        return cmd.response(ResponseCode.SUCCESS, body=body)

    # -- ACLs ----------------------------------------------------------------------------

    def _write_acl(self, cmd: RemotingCommand, *, create: bool) -> RemotingCommand:
        try:
            self._on_writer()
            subject = self._name(cmd, "subject")
            acl = decode_acl_info(cmd.body or b"{}", subject)
            if create:
                self.metadata.create_acl(acl)
            else:
                self.metadata.update_acl(acl)
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def create_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return self._write_acl(cmd, create=True)

    def update_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return self._write_acl(cmd, create=False)

    def delete_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext or {}
        try:
            self._on_writer()
            subject = self._name(cmd, "subject")
            policy = ext.get("policyType", "").strip()
            resource = ext.get("resource", "").strip()
            self.metadata.delete_acl(
                subject,
                PolicyType.parse(policy) if policy else None,
                Resource.parse(resource) if resource else None,
            )
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def get_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            acl = self.metadata.get_acl(self._name(cmd, "subject"))
        except (AuthMetadataError, ValueError) as exc:
            return self._invalid(cmd, str(exc))
        body = encode_acl_info(acl) if acl is not None else None
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def list_acls(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext or {}
        acls = self.metadata.list_acls(ext.get("subjectFilter", ""), ext.get("resourceFilter", ""))
        body = encode_acl_infos(acls) if acls else None
        return cmd.response(ResponseCode.SUCCESS, body=body)

    # -- replicas ------------------------------------------------------------------------

    def snapshot(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_AUTH_METADATA: every user (with its password: a replica checks signatures)
        and ACL, for a replica of this broker."""
        return cmd.response(
            ResponseCode.SUCCESS,
            {"version": str(self.metadata.version)},
            self.metadata.snapshot(),
        )
