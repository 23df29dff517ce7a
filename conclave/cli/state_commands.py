"""`conclave state`: read shared state through a running gateway as an agent (`get`, `ls`,
`history`), and prove a namespace's history serializable from Redis (`check`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

import typer

from conclave.cli.agents_commands import (
    GatewayOption,
    TokenOption,
    bearer,
    gateway_request,
    print_rows,
)
from conclave.cli.terminal import cli_console
from conclave.stack import DEFAULT_GATEWAY

if TYPE_CHECKING:  # `check` reads Redis itself; the HTTP commands need neither
    from gateway.state import CheckReport, NamespaceKeys

state_app = typer.Typer(
    no_args_is_help=True,
    help="Shared state: read a key, list keys, read a history; check a history.",
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


@state_app.command("ls")
def ls(
    namespace: Annotated[str, typer.Argument(help="the namespace")],
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object a key: key, version")
    ] = False,
) -> None:
    """The namespace's keys (those written at least once) and their versions, in name order,
    as the --token's agent: it needs the read right on the namespace. Nothing is logged as
    read: `state get` a key before a commit that depends on it."""
    rows = [("KEY", "VERSION")]
    after = None
    while True:
        query = "?limit=1000" + (f"&after={quote(after)}" if after else "")
        page = gateway_request(gateway, "GET", f"/v1/state/{namespace}/keys{query}", _bearer(token))
        for entry in page["keys"]:
            if as_json:
                typer.echo(json.dumps(entry))
            rows.append((entry["key"], str(entry["version"])))
        after = page["next_after"]
        if after is None:
            break
    if not as_json:
        print_rows(rows)


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
    from gateway import connect_redis
    from gateway.state import check_namespace_history

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
    import anyio

    from gateway import Settings
    from gateway.state import NamespaceKeys, check_namespace

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
