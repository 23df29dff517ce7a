"""`conclave state`: read shared state through a running gateway as an agent (`get`,
`history`), and prove a namespace's history serializable from Redis (`check`)."""

from __future__ import annotations

import json
from typing import Annotated

import anyio
import typer

from conclave.agents_cli import (
    DEFAULT_GATEWAY,
    GatewayOption,
    TokenOption,
    bearer,
    gateway_request,
)
from conclave.cli_console import cli_console
from gateway import Settings, connect_redis
from gateway.state import CheckReport, NamespaceKeys, check_namespace, check_namespace_history

state_app = typer.Typer(
    no_args_is_help=True, help="Shared state: read a key or a history; check a history."
)


@state_app.command("get")
def get(
    namespace: Annotated[str, typer.Argument(help="the namespace")],
    key: Annotated[str, typer.Argument(help="the key")],
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
) -> None:
    """Read a key as the --token's agent: its value and version as JSON (version 0: not
    written yet). The read is logged for the agent's session, as any read through the gateway."""
    answer = gateway_request(gateway, "GET", f"/v1/state/{namespace}/{key}", _bearer(token))
    typer.echo(json.dumps(answer))


@state_app.command("history")
def history(
    namespace: Annotated[str, typer.Argument(help="the namespace")],
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    limit: Annotated[int, typer.Option(help="commits per page (1-1000)")] = 100,
) -> None:
    """Every commit of the namespace, oldest first, one JSON object a line."""
    after = None
    while True:
        query = f"?limit={limit}" + (f"&after={after}" if after else "")
        path = f"/v1/state/{namespace}/history{query}"
        page = gateway_request(gateway, "GET", path, _bearer(token))
        for entry in page["entries"]:
            typer.echo(json.dumps(entry))
        if not page["entries"]:
            return
        after = page["next_after"]


def _bearer(token: str | None) -> dict[str, str]:
    return bearer(token, "the agent whose rights read the state")


console = cli_console()


async def _check(redis_url: str, keys: NamespaceKeys) -> CheckReport | None:
    """The namespace's report; None when this Redis holds neither its configuration nor a
    history (a misspelt name or tenant: an empty history would look serializable)."""
    redis = connect_redis(redis_url)
    try:
        if not await redis.exists(keys.config, keys.history):
            return None
        return await check_namespace_history(redis, keys)
    finally:
        await redis.aclose()


@state_app.command("check")
def check(
    namespace: Annotated[str, typer.Argument(help="the namespace whose history to check")],
    tenant: Annotated[str, typer.Option(help="the tenant that owns the namespace")] = "default",
) -> None:
    """Prove from the history stream that the namespace's commits were serializable."""
    redis_url = Settings().redis_url
    if not redis_url:
        raise typer.BadParameter("set CONCLAVE_REDIS_URL to the Redis that holds the state")
    try:
        keys = NamespaceKeys(tenant, check_namespace(namespace))
    except Exception as exc:
        raise typer.BadParameter(str(exc)) from exc
    report = anyio.run(_check, redis_url, keys)
    if report is None:
        typer.echo(
            f"conclave state check: {tenant}/{namespace} does not exist in this Redis (no"
            " configuration, no history): check the name and --tenant",
            err=True,
        )
        raise typer.Exit(1)
    for anomaly in report.anomalies:
        console.print(f"[red]{anomaly}[/]", highlight=False)
    verdict = "[green]serializable[/]" if report.serializable else "[red]NOT serializable[/]"
    console.print(
        f"{tenant}/{namespace}: {report.commits} commits over {report.keys} keys, "
        f"{len(report.anomalies)} anomalies: {verdict}"
    )
    if not report.serializable:
        raise typer.Exit(1)
