"""`conclave run FILE.py`: run a team (or one agent) defined in a user's Python file.

The file defines `team` (from `agents.teams`) or `agent` (an `Agent`), and may define `task`
(the text to work on; `--task` overrides it). Without `--gateway`, the embedded stack is
started for the run and stopped after it; with `--gateway URL`, agents are registered there
with `--admin-key`.
"""

from __future__ import annotations

import runpy
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from conclave.cli.terminal import cli_console

if TYPE_CHECKING:  # the SDK (and LangGraph under it) is imported when a file runs
    from agents import Team

console = cli_console()


class TeamFileError(ValueError):
    """The file cannot give a team: missing, not Python, failing, or defining none."""


def load_team(path: Path) -> tuple[Team, str | None]:
    """The `team` (or a single `agent`) and the `task` the file defines; TeamFileError says
    what is wrong with the file in one line."""
    from agents import Agent, Team, single

    if not path.is_file():
        raise TeamFileError(f"{path} is not a file: pass the Python file that defines `team`")
    try:
        scope = runpy.run_path(str(path), run_name="__conclave_run__")
    except SyntaxError as exc:
        raise TeamFileError(f"{path}, line {exc.lineno}: {exc.msg}: fix the file") from exc
    except Exception as exc:  # the user's code failed: where, and with what
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise TeamFileError(
            f"{path} failed at {frame.filename}, line {frame.lineno}: {type(exc).__name__}: {exc}"
        ) from exc
    team, agent = scope.get("team"), scope.get("agent")
    if isinstance(team, Team):
        found = team
    elif isinstance(agent, Agent):
        found = single(agent)
    else:
        raise TeamFileError(
            f"{path} defines neither `team` (agents.teams.single/independent/centralized/"
            "decentralized) nor `agent` (agents.Agent)"
        )
    task = scope.get("task")
    return found, str(task) if task is not None else None


async def run_team(team: Team, task: str, url: str, admin_key: str) -> dict[str, Any]:
    from agents import GatewayClient

    async with GatewayClient(url, admin_key=admin_key) as admin:
        await team.register(admin)
        try:
            return await team.run(task)
        finally:
            await team.aclose()


def show(result: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="Answers", title_justify="left")
    for column in ("agent", "stopped", "tool calls", "answer"):
        table.add_column(column)
    for answer in result.get("answers", []):
        table.add_row(
            answer["agent"], answer["stopped"], str(answer["tool_calls"]), str(answer["answer"])
        )
    console.print(table)


def run_file(
    file: Annotated[Path, typer.Argument(help="a Python file defining `team` or `agent`")],
    task: Annotated[str | None, typer.Option(help="the task; default: the file's `task`")] = None,
    gateway: Annotated[
        str | None, typer.Option(help="gateway URL; default: start the embedded stack")
    ] = None,
    admin_key: Annotated[
        str | None, typer.Option(help="admin key for --gateway (default: CONCLAVE_ADMIN_KEY)")
    ] = None,
) -> None:
    """Run a team defined in FILE.py against the embedded stack (or --gateway URL)."""
    import anyio

    from agents import GatewayCallError
    from conclave.stack import EmbeddedStack
    from gateway import Settings

    try:
        team, file_task = load_team(file)
    except TeamFileError as exc:
        _fail(str(exc))
    text = task or file_task
    if not text:
        _fail("no task: pass --task or define `task` in the file")
    settings = Settings(port=0)
    key = admin_key or settings.admin_key.get_secret_value()
    try:
        if gateway is not None:
            result = anyio.run(run_team, team, text, gateway, key)
        else:
            with EmbeddedStack(settings) as stack:
                console.print(f"[bold]gateway[/] {stack.url} (embedded)")
                result = anyio.run(run_team, team, text, stack.url, key)
    except GatewayCallError as exc:  # unreachable, or refused (a bad key, a bad registration)
        _fail(str(exc))
    show(result)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
