"""`conclave approvals ...`: the calls held for approval, decided by an approver through a
running gateway (`ls`, `show`, `approve`, `deny`).

Every command talks HTTP to `--gateway` (CONCLAVE_URL) with the approver's token (`--token`,
CONCLAVE_TOKEN): an agent registered with `--approve TOOL_GLOB`. It sees and decides its own
tenant's held calls of those tools, never its own calls nor calls made on its behalf.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from conclave.cli.agents_commands import (
    GatewayOption,
    TokenOption,
    bearer,
    gateway_request,
    print_rows,
)
from conclave.stack import DEFAULT_GATEWAY
from protocol import ApprovalRecord

approvals_app = typer.Typer(
    no_args_is_help=True,
    help="Calls held for approval: list them, show one, approve or deny it.",
)

IdArgument = Annotated[str, typer.Argument(help="the approval's id (ap_...), as `ls` lists it")]
NoteOption = Annotated[str, typer.Option(help="why: the caller and the audit see it")]


def _bearer(token: str | None) -> dict[str, str]:
    return bearer(token, "an approver's (an agent registered with --approve TOOL)")


def _when(ms: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


@approvals_app.command("ls")
def ls(
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object an approval")] = False,
) -> None:
    """The calls waiting for your approval, oldest first."""
    answer = gateway_request(gateway, "GET", "/v1/approvals", _bearer(token))
    records = [ApprovalRecord.model_validate(item) for item in answer["approvals"]]
    if as_json:
        for record in records:
            typer.echo(record.model_dump_json())
        return
    if not records:
        typer.echo("no calls are waiting for your approval")
        return
    rows = [("ID", "ASKED BY", "TOOL", "POLICY", "EXPIRES", "ARGUMENTS")]
    rows += [
        (
            r.id,
            r.agent + (f" ({r.obo})" if r.obo else ""),
            r.tool,
            r.policy,
            _when(r.expires_at_ms),
            json.dumps(r.arguments, sort_keys=True),
        )
        for r in records
    ]
    print_rows(rows)


@approvals_app.command("show")
def show(
    approval_id: IdArgument,
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
) -> None:
    """One approval, pending or settled: who asked, the exact arguments, why, who decided."""
    answer = gateway_request(gateway, "GET", f"/v1/approvals/{approval_id}", _bearer(token))
    _print(ApprovalRecord.model_validate(answer))


@approvals_app.command("approve")
def approve(
    approval_id: IdArgument,
    note: NoteOption = "",
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
) -> None:
    """Approve the held call: it runs, with exactly the arguments `show` shows."""
    _decide(gateway, token, approval_id, "approve", note)


@approvals_app.command("deny")
def deny(
    approval_id: IdArgument,
    note: NoteOption = "",
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
) -> None:
    """Deny the held call: its caller is refused APPROVAL_DENIED, with your note."""
    _decide(gateway, token, approval_id, "deny", note)


def _decide(gateway: str, token: str | None, approval_id: str, verb: str, note: str) -> None:
    path = f"/v1/approvals/{approval_id}/{verb}"
    answer: Any = gateway_request(gateway, "POST", path, _bearer(token), {"note": note})
    record = ApprovalRecord.model_validate(answer)
    typer.echo(f"{record.id} {record.status} by {record.decided_by}: {record.tool}")


def _print(record: ApprovalRecord) -> None:
    lines = [
        ("id", record.id),
        ("status", record.status),
        (
            "asked by",
            f"{record.tenant}/{record.agent}" + (f" ({record.obo})" if record.obo else ""),
        ),
        ("chain", " -> ".join(record.chain) or "-"),
        ("tool", record.tool),
        ("arguments", json.dumps(record.arguments, sort_keys=True, indent=2)),
        ("digest", record.digest),
        ("policy", record.policy + (f": {record.reason}" if record.reason else "")),
        ("asked at", _when(record.asked_at_ms)),
        ("expires", _when(record.expires_at_ms)),
        ("decided by", record.decided_by or "-"),
        ("decided at", _when(record.decided_at_ms)),
        ("note", record.note or "-"),
    ]
    for name, value in lines:
        typer.echo(f"{name + ':':<12}{value}")
