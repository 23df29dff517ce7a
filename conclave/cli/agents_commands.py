"""`conclave agents ...`: register, list and revoke agents through a running gateway's admin API.

Every command talks HTTP to `--gateway` (CONCLAVE_URL, default http://127.0.0.1:8321) with the
admin key: `--admin-key` (CONCLAVE_ADMIN_KEY), else, for a gateway on this machine, the key
`conclave serve` generated in its data dir (`--data-dir`, CONCLAVE_DATA_DIR). The helpers that
reach the gateway and turn its refusals into one line are shared with `conclave tools list`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import typer
from pydantic import ValidationError

from conclave.stack import DEFAULT_GATEWAY, is_loopback
from protocol import (
    ADMIN_KEY_HEADER,
    TRACEBACK_DETAIL,
    AgentRecord,
    AgentRegistration,
    AgentToken,
    SerfError,
)

GatewayOption = Annotated[
    str, typer.Option(envvar="CONCLAVE_URL", help="the gateway's URL (conclave serve prints it)")
]
AdminKeyOption = Annotated[
    str | None,
    typer.Option(
        envvar="CONCLAVE_ADMIN_KEY",
        help="the gateway's admin key (default for a local gateway: the one in --data-dir)",
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        envvar="CONCLAVE_DATA_DIR",
        help="the data dir of a local `conclave serve` (default: $XDG_DATA_HOME/conclave)",
    ),
]

TokenOption = Annotated[
    str | None, typer.Option(envvar="CONCLAVE_TOKEN", help="the agent's token: whose rights apply")
]


def bearer(token: str | None, whose: str) -> dict[str, str]:
    """The Authorization header of an agent's token; without one, one line saying `whose`
    token is needed."""
    if not token:
        fail(f"pass --token (or set CONCLAVE_TOKEN): {whose}")
    return {"Authorization": f"Bearer {token}"}


agents_app = typer.Typer(
    no_args_is_help=True, help="Agents on a running gateway: register, list, revoke."
)


@agents_app.command("register")
def register(
    tenant: Annotated[str, typer.Option(help="tenant the agent belongs to")],
    agent: Annotated[str, typer.Option(help="agent id")],
    tool: Annotated[
        list[str] | None, typer.Option(help="a tool it may call (a glob: 'kv.*'); repeatable")
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(help="shared state it may use: NAME=read or NAME=write; repeatable"),
    ] = None,
    a2a_agent: Annotated[
        list[str] | None,
        typer.Option(
            "--a2a-agent", help="an A2A agent it may call (a glob: 'research-*'); repeatable"
        ),
    ] = None,
    approve: Annotated[
        list[str] | None,
        typer.Option(help="a tool whose held calls it may approve (a glob); repeatable"),
    ] = None,
    delegable: Annotated[
        list[str] | None,
        typer.Option(
            help="a tool or state scope the agents it delegates to may use for it beyond its"
            " own grant ('tool:run_python', 'state:notes:write'); repeatable"
        ),
    ] = None,
    obo: Annotated[str | None, typer.Option(help="user the agent acts on behalf of")] = None,
    ttl: Annotated[int | None, typer.Option(help="its token's lifetime in seconds")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole answer as JSON")] = False,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    admin_key: AdminKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Register an agent (or re-register it, revoking its older tokens); print its token."""
    fields: dict[str, Any] = {
        "tenant": tenant,
        "agent": agent,
        "tools": tool or [],
        "agents": a2a_agent or [],
        "namespaces": dict(_namespace_grant(n) for n in namespace or []),
        "approves": approve or [],
        "delegable": delegable or [],
        "obo": obo,
    }
    if ttl is not None:
        fields["token_ttl_s"] = ttl
    try:
        registration = AgentRegistration(**fields)
    except ValidationError as exc:
        fail("; ".join(_problem(e) for e in exc.errors()))
    key = resolve_admin_key(gateway, admin_key, data_dir)
    body = registration.model_dump(mode="json")
    answer = AgentToken.model_validate(
        gateway_request(gateway, "POST", "/v1/agents", {ADMIN_KEY_HEADER: key}, body)
    )
    typer.echo(answer.model_dump_json(indent=2) if as_json else answer.token)


@agents_app.command("list")
def list_agents(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's agents")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the list as JSON")] = False,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    admin_key: AdminKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Every registered agent: tenant, agent, whether it is revoked, when, and its scopes."""
    key = resolve_admin_key(gateway, admin_key, data_dir)
    path = "/v1/agents" if tenant is None else f"/v1/agents?tenant={tenant}"
    payload = gateway_request(gateway, "GET", path, {ADMIN_KEY_HEADER: key})
    records = [AgentRecord.model_validate(item) for item in payload]
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return
    rows = [("TENANT", "AGENT", "STATUS", "REGISTERED", "SCOPES")]
    rows += [
        (
            r.tenant,
            r.agent,
            "revoked" if r.revoked else "active",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at_ms / 1000)),
            " ".join(r.scopes) or "(none)",
        )
        for r in records
    ]
    print_rows(rows)


@agents_app.command("revoke")
def revoke(
    tenant: Annotated[str, typer.Option(help="tenant the agent belongs to")],
    agent: Annotated[str, typer.Option(help="agent id")],
    gateway: GatewayOption = DEFAULT_GATEWAY,
    admin_key: AdminKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Revoke an agent: every token it holds is refused from its next call on."""
    key = resolve_admin_key(gateway, admin_key, data_dir)
    path = f"/v1/agents/{tenant}/{agent}"
    record = AgentRecord.model_validate(
        gateway_request(gateway, "DELETE", path, {ADMIN_KEY_HEADER: key})
    )
    scopes = " ".join(record.scopes) or "none"
    typer.echo(f"revoked {record.tenant}/{record.agent} (scopes: {scopes}); its tokens are refused")


def resolve_admin_key(gateway: str, admin_key: str | None, data_dir: Path | None) -> str:
    """The key given, else a local gateway's generated one from its data dir."""
    if admin_key:
        return admin_key
    from gateway import ADMIN_KEY_FILE, default_data_dir  # the secrets store alone

    path = (data_dir or default_data_dir()) / ADMIN_KEY_FILE
    if is_loopback(httpx.URL(gateway).host) and path.is_file():
        return path.read_text().strip()
    fail(
        f"no admin key for {gateway}: pass --admin-key or set CONCLAVE_ADMIN_KEY"
        f" (a local gateway's key is in {path}; `conclave serve` prints its data dir)"
    )


def gateway_request(
    gateway: str, method: str, path: str, headers: dict[str, str], body: Any = None
) -> Any:
    """The gateway's JSON answer; an unreachable gateway or a refusal ends in one line."""
    url = gateway.rstrip("/") + path
    try:
        response = httpx.request(method, url, headers=headers, json=body, timeout=30.0)
    except httpx.HTTPError as exc:
        fail(
            f"the gateway at {gateway} is not reachable ({type(exc).__name__}): start it with"
            " `conclave serve`, or check --gateway"
        )
    if response.status_code >= 400:
        try:
            serf = SerfError.model_validate(response.json())
        except ValueError:
            fail(f"{gateway} answered {response.status_code}: is it a Conclave gateway?")
        told = serf.details.get(TRACEBACK_DETAIL)
        if isinstance(told, str):  # asked for (`tools call --debug`) by the tools' author
            typer.echo(told.rstrip(), err=True)
        fail(f"{serf.code}: {serf.message}")
    return response.json()


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell, the last one left as it is."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        typer.echo("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]))


def fail(message: str) -> NoReturn:
    """One line on stderr, exit 1: what went wrong and what to do."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _namespace_grant(text: str) -> tuple[str, str]:
    name, _, access = text.partition("=")
    if not name or access not in ("read", "write"):
        fail(f"--namespace {text!r}: write NAME=read or NAME=write")
    return name, access


_OPTION_OF_FIELD = {
    "tools": "--tool",
    "namespaces": "--namespace",
    "approves": "--approve",
    "token_ttl_s": "--ttl",
}


def _problem(error: Any) -> str:
    if not error["loc"]:
        return str(error["msg"])
    field = str(error["loc"][0])
    return f"{_OPTION_OF_FIELD.get(field, '--' + field)}: {error['msg']}"
