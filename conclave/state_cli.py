"""`conclave state`: inspect shared state in Redis (CONCLAVE_REDIS_URL)."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from conclave.cli_console import cli_console
from gateway import Settings, connect_redis
from gateway.state import CheckReport, NamespaceKeys, check_namespace, check_namespace_history

state_app = typer.Typer(no_args_is_help=True, help="Shared state: check a namespace's history.")
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
