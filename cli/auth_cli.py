"""``rocketq admin user ...`` and ``rocketq admin acl ...``: users and ACL policies (RocketMQ
5.3's ACL 2.0) as mqadmin manages them, on every master of a cluster (``-c``) or one broker
(``-b``). Changes print the brokers written to; reads print a table, or JSON with ``--json``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from rocketq.cli.admin_cli import DEFAULT_NAMESRV, JsonOut, Namesrv, _with_admin, emit, run

user_app = typer.Typer(
    help="Users: who may sign requests (name = access key, password = secret key).",
    no_args_is_help=True,
)
acl_app = typer.Typer(
    help="ACL policies: which user may do what to which topics, groups and clusters.",
    no_args_is_help=True,
)

Cluster = Annotated[
    str | None,
    typer.Option("--cluster", "-c", help="Every master of this cluster (default: of all)."),
]
BrokerAddr = Annotated[
    str | None, typer.Option("--broker-addr", "-b", help="Only this broker (host:port).")
]
Username = Annotated[str, typer.Option("--username", "-u", help="The user's name.")]
Subject = Annotated[str, typer.Option("--subject", "-s", help="Whom it is for: User:alice.")]
Resources = Annotated[
    str,
    typer.Option(
        "--resources",
        "-r",
        help="Comma-separated: Topic:orders, Topic:order* (prefix), Group:g1, Cluster:c, *.",
    ),
]
Actions = Annotated[
    str,
    typer.Option(
        "--actions", "-a", help="Comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All."
    ),
]
SourceIps = Annotated[
    str,
    typer.Option(
        "--source-ips", "-i", help="Comma-separated addresses or CIDR blocks (default: any)."
    ),
]
Decision = Annotated[str, typer.Option("--decision", "-d", help="Allow or Deny (Deny wins).")]


def _on(targets: list[str]) -> str:
    return ", ".join(targets)


# -- users ------------------------------------------------------------------------------------


@user_app.command("create")
def user_create(
    username: Username,
    password: Annotated[
        str,
        typer.Option(
            "--password",
            "-p",
            prompt=True,
            hide_input=True,
            help="The user's password, its secret key (asked for when not given).",
        ),
    ],
    user_type: Annotated[
        str, typer.Option("--user-type", "-t", help="Normal or Super.")
    ] = "Normal",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Create a user on every master of a cluster (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.create_user(
                username, password, user_type, cluster=cluster, broker_addr=broker_addr
            ),
        )
    )
    typer.echo(f"user {username} created on {_on(targets)}")


@user_app.command("update")
def user_update(
    username: Username,
    password: Annotated[
        str | None, typer.Option("--password", "-p", help="A new password.")
    ] = None,
    user_type: Annotated[
        str | None, typer.Option("--user-type", "-t", help="Normal or Super.")
    ] = None,
    user_status: Annotated[
        str | None, typer.Option("--user-status", "-s", help="enable or disable.")
    ] = None,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Change a user's password, type or status on every master of a cluster (or one
    broker); what is not given stays as it is."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.update_user(
                username,
                password,
                user_type,
                user_status,
                cluster=cluster,
                broker_addr=broker_addr,
            ),
        )
    )
    typer.echo(f"user {username} updated on {_on(targets)}")


@user_app.command("delete")
def user_delete(
    username: Username,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Delete a user from every master of a cluster (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv, lambda a: a.delete_user(username, cluster=cluster, broker_addr=broker_addr)
        )
    )
    typer.echo(f"user {username} deleted from {_on(targets)}")


_USER_HEADER = ["username", "type", "status"]


def _user_rows(users: list[Any]) -> list[list[str]]:
    return [[u.username, u.user_type, u.user_status] for u in users]


@user_app.command("get")
def user_get(
    username: Username,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
    as_json: JsonOut = False,
) -> None:
    """Show a user (as the first master of the cluster, or the broker, has it)."""
    user = run(
        lambda: _with_admin(
            namesrv, lambda a: a.get_user(username, cluster=cluster, broker_addr=broker_addr)
        )
    )
    if user is None:
        typer.echo(f"error: no user {username!r}", err=True)
        raise typer.Exit(1)
    emit(_user_rows([user]), _USER_HEADER, as_json)


@user_app.command("list")
def user_list(
    filter: Annotated[str, typer.Option("--filter", "-f", help="Only names containing this.")] = "",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
    as_json: JsonOut = False,
) -> None:
    """List the users (of the first master of the cluster, or of the broker)."""
    users = run(
        lambda: _with_admin(
            namesrv, lambda a: a.list_users(filter, cluster=cluster, broker_addr=broker_addr)
        )
    )
    emit(_user_rows(users), _USER_HEADER, as_json)


# -- ACLs ---------------------------------------------------------------------------------------


@acl_app.command("create")
def acl_create(
    subject: Subject,
    resources: Resources,
    actions: Actions,
    source_ips: SourceIps = "",
    decision: Decision = "Allow",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Give a user a policy on every master of a cluster (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.create_acl(
                subject,
                resources,
                actions,
                source_ips,
                decision,
                cluster=cluster,
                broker_addr=broker_addr,
            ),
        )
    )
    typer.echo(f"ACL of {subject} created on {_on(targets)}")


@acl_app.command("update")
def acl_update(
    subject: Subject,
    resources: Resources,
    actions: Actions,
    source_ips: SourceIps = "",
    decision: Decision = "Allow",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Replace what a user's policy says of these resources, on every master of a cluster
    (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.update_acl(
                subject,
                resources,
                actions,
                source_ips,
                decision,
                cluster=cluster,
                broker_addr=broker_addr,
            ),
        )
    )
    typer.echo(f"ACL of {subject} updated on {_on(targets)}")


@acl_app.command("delete")
def acl_delete(
    subject: Subject,
    resource: Annotated[
        str | None,
        typer.Option("--resource", "-r", help="Only this resource (default: the whole ACL)."),
    ] = None,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
) -> None:
    """Delete a user's ACL, or what it says of one resource, from every master of a
    cluster (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.delete_acl(subject, resource, cluster=cluster, broker_addr=broker_addr),
        )
    )
    what = f"ACL of {subject}" + (f" on {resource}" if resource else "")
    typer.echo(f"{what} deleted from {_on(targets)}")


_ACL_HEADER = ["subject", "policy", "resource", "actions", "source_ips", "decision"]


def _acl_rows(acls: list[Any]) -> list[list[str]]:
    return [
        [
            acl.subject,
            policy.policy_type,
            entry.resource,
            ",".join(entry.actions),
            ",".join(entry.source_ips) or "*",
            entry.decision,
        ]
        for acl in acls
        for policy in acl.policies
        for entry in policy.entries
    ]


def _emit_acls(acls: list[Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([_acl_json(a) for a in acls]))
    else:
        emit(_acl_rows(acls), _ACL_HEADER, False)


def _acl_json(acl: Any) -> dict[str, Any]:
    """RocketMQ's AclInfo JSON shape."""
    return {
        "subject": acl.subject,
        "policies": [
            {
                "policyType": p.policy_type,
                "entries": [
                    {
                        "resource": e.resource,
                        "actions": list(e.actions),
                        "sourceIps": list(e.source_ips),
                        "decision": e.decision,
                    }
                    for e in p.entries
                ],
            }
            for p in acl.policies
        ],
    }


@acl_app.command("get")
def acl_get(
    subject: Subject,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
    as_json: JsonOut = False,
) -> None:
    """Show a user's ACL (as the first master of the cluster, or the broker, has it)."""
    acl = run(
        lambda: _with_admin(
            namesrv, lambda a: a.get_acl(subject, cluster=cluster, broker_addr=broker_addr)
        )
    )
    if acl is None:
        typer.echo(f"error: no ACL for {subject!r}", err=True)
        raise typer.Exit(1)
    _emit_acls([acl], as_json)


@acl_app.command("list")
def acl_list(
    subject: Annotated[
        str, typer.Option("--subject", "-s", help="Only subjects containing this.")
    ] = "",
    resource: Annotated[
        str, typer.Option("--resource", "-r", help="Only ACLs naming a resource containing this.")
    ] = "",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Cluster = None,
    broker_addr: BrokerAddr = None,
    as_json: JsonOut = False,
) -> None:
    """List the ACLs (of the first master of the cluster, or of the broker)."""
    acls = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.list_acls(subject, resource, cluster=cluster, broker_addr=broker_addr),
        )
    )
    _emit_acls(acls, as_json)
