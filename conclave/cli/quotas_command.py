"""`conclave quotas`: the quotas an agent's calls count against, through a running gateway
(`GET /v1/quotas` with its token): each limit's use in its window, what remains, when it
resets."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from conclave.cli.agents_commands import (
    GatewayOption,
    TokenOption,
    bearer,
    gateway_request,
    print_rows,
)
from conclave.stack import DEFAULT_GATEWAY
from protocol import QuotaUse


def quotas(
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object a limit")] = False,
) -> None:
    """The quotas the --token's agent counts against: use, what remains, when it resets."""
    headers = bearer(token, "the agent whose quotas to show")
    answer = gateway_request(gateway, "GET", "/v1/quotas", headers)
    uses = [QuotaUse.model_validate(item) for item in answer["quotas"]]
    if as_json:
        for use in uses:
            typer.echo(use.model_dump_json())
        return
    if not uses:
        typer.echo("no quota limits this agent's calls")
        return
    rows = [("QUOTA", "SUBJECT", "LIMIT", "USED", "ALLOWED", "REMAINING", "RESETS")]
    rows += [
        (
            u.quota,
            u.subject,
            u.limit,
            f"{u.used:g}",
            f"{u.allowed:g}",
            f"{u.remaining:g}",
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(u.resets_at_ms / 1000)),
        )
        for u in uses
    ]
    print_rows(rows)
