"""`conclave tools ...`: what the gateway would serve (or does), and whether each source works.

Both commands prepare and start the `python` sources the way `conclave serve` does (their
code is imported inside a sandbox of the configured backend, never here), so what they
print is what the gateway will serve. `tools list --gateway URL` asks a running gateway
instead, with an agent's token or the admin key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from conclave.cli.agents_commands import (
    AdminKeyOption,
    DataDirOption,
    GatewayOption,
    TokenOption,
    bearer,
    gateway_request,
    print_rows,
    resolve_admin_key,
)
from conclave.stack import DEFAULT_GATEWAY
from protocol import ADMIN_KEY_HEADER, DEBUG_HEADER, ResourceIntent, ToolSpec

if TYPE_CHECKING:  # what reads conclave.toml and starts sources; `call` and `list
    # --gateway` only speak HTTP and import none of it
    from gateway import PythonSources, Settings, StdioSources
    from tools.sources import McpHttpSource

tools_app = typer.Typer(no_args_is_help=True, help="Tools: list them, check tool sources.")


@tools_app.command("list")
def list_tools(
    config: Annotated[
        Path | None, typer.Option(help="conclave.toml (default: CONCLAVE_CONFIG)")
    ] = None,
    gateway: Annotated[
        str | None, typer.Option(help="list what the running gateway at this URL serves")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="CONCLAVE_TOKEN", help="with --gateway: list what this agent may call"),
    ] = None,
    admin_key: AdminKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Every tool the gateway serves: its source, name, intent and where it runs.

    With --gateway: the tools a running gateway serves, one row each (name, intent, source):
    those the --token's agent may call, or with the admin key every tool.
    """
    if gateway is not None:
        _list_served(gateway, token, admin_key, data_dir)
        return
    import importlib

    from gateway import effective_backend
    from tools import default_registry

    settings = effective_backend(_settings(config))
    for module in settings.tool_modules:  # the configured (trusted) tool modules
        importlib.import_module(module)
    rows = [("SOURCE", "TOOL", "INTENT", "RUNS IN")]
    where = _where(settings)
    rows += [("(built in)", t.name, _intent(t.spec.intent), where) for t in default_registry]
    found = _open_sources(settings)
    where = _where(found.sandbox_settings)  # on docker: the image with the sources' layers
    for report in found.reports:
        rows += [(report.name, t.name, _intent(t.spec.intent), where) for t in report.tools]
    print_rows(rows)
    for report in found.reports:
        if report.error is not None:
            typer.echo(f"source {report.name!r} not served: {report.error}", err=True)


@tools_app.command("call")
def call(
    name: Annotated[str, typer.Argument(help="the tool to call")],
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="an argument, KEY=VALUE; VALUE is read as JSON when it is JSON"),
    ] = None,
    token: TokenOption = None,
    gateway: GatewayOption = DEFAULT_GATEWAY,
    debug: Annotated[
        bool,
        typer.Option(
            help="a failing tool's own traceback too: for the tools' author, so it sends the"
            " admin key (--admin-key, or a local gateway's from --data-dir)"
        ),
    ] = False,
    admin_key: AdminKeyOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Call a tool through a running gateway as the --token's agent, all six stages; print
    its result as JSON (a refusal or the tool's failure: one line, exit 1; with --debug, the
    tool's traceback before it)."""
    auth = bearer(token, "the agent whose identity calls the tool")
    if debug:
        key = resolve_admin_key(gateway, admin_key, data_dir)
        auth = {**auth, DEBUG_HEADER: "1", ADMIN_KEY_HEADER: key}
    arguments = dict(_argument(text) for text in arg or [])
    answer = gateway_request(
        gateway, "POST", f"/v1/tools/{name}/call", auth, {"arguments": arguments}
    )
    typer.echo(json.dumps(answer.get("result") if isinstance(answer, dict) else answer))


def _argument(text: str) -> tuple[str, object]:
    key, equals, raw = text.partition("=")
    if not key or not equals:
        _fail(f"--arg {text!r}: write KEY=VALUE")
    try:
        return key, json.loads(raw)
    except ValueError:  # not JSON: the text as it is
        return key, raw


@tools_app.command("check")
def check(
    config: Annotated[Path, typer.Argument(help="conclave.toml")],
) -> None:
    """Start each tool source once; print what it serves, or one line saying why it cannot."""
    import anyio

    from gateway.sources import check_upstream
    from tools.sources import McpHttpSource, McpStdioSource, PythonSource, load_config

    settings = _settings(config)
    found = _open_sources(settings)
    failed = False
    stdio = _open_stdio(settings)
    for source in load_config(config.resolve()).source:
        if isinstance(source, McpStdioSource):  # started in a sandbox, its lists read
            if source.name in stdio.refused:
                failed = True
                typer.echo(f"FAIL  {source.name} (mcp_stdio): {stdio.refused[source.name]}")
            else:
                server = stdio.servers.get(source.name)
                own = [source.qualified(t) for t in server.tools] if server else []
                names = ", ".join(own) or "no tools (all filtered out)"
                typer.echo(f"ok    {source.name} (mcp_stdio): {names}")
            continue
        if isinstance(source, McpHttpSource):  # connected once, its lists read
            upstream = anyio.run(check_upstream, source)
            if upstream.error is not None:
                failed = True
                typer.echo(f"FAIL  {source.name} (mcp_http): {upstream.error}")
            else:
                names = ", ".join(_served_or_why(source, t) for t in upstream.tools)
                extra = f" ({upstream.resources} resources, {upstream.prompts} prompts)"
                typer.echo(f"ok    {source.name} (mcp_http): {names or 'no tools'}{extra}")
            continue
        if not isinstance(source, PythonSource):
            typer.echo(f"skip  {source.name} ({source.kind}): checked when the gateway starts")
            continue
        report = next(r for r in found.reports if r.name == source.name)
        if report.error is not None:
            failed = True
            typer.echo(f"FAIL  {source.name} (python): {report.error}")
        else:
            names = ", ".join(t.name for t in report.tools) or "no tools (all filtered out)"
            typer.echo(f"ok    {source.name} (python): {names}")
    if failed:
        raise typer.Exit(1)


def _list_served(
    gateway: str, token: str | None, admin_key: str | None, data_dir: Path | None
) -> None:
    """GET /v1/tools as the token's agent; with the admin key, the admin catalog of every
    tool the gateway serves (GET /v1/catalog/tools)."""
    if token is None:
        key = {ADMIN_KEY_HEADER: resolve_admin_key(gateway, admin_key, data_dir)}
        specs = _specs(gateway_request(gateway, "GET", "/v1/catalog/tools", key))
    else:
        auth = {"Authorization": f"Bearer {token}"}
        specs = _specs(gateway_request(gateway, "GET", "/v1/tools", auth))
    rows = [("TOOL", "INTENT", "SOURCE")]
    rows += [(s.name, _intent(s.intent), _source_of(s.name)) for s in specs]
    print_rows(rows)


def _specs(payload: object) -> list[ToolSpec]:
    items = payload if isinstance(payload, list) else []
    return sorted((ToolSpec.model_validate(item) for item in items), key=lambda s: s.name)


def _source_of(tool: str) -> str:
    """A source's tools are named `<source>__<tool>` (or with the source's own separator,
    `tools.sources.tool_names`); the gateway's own have no `__`."""
    from tools.sources import DEFAULT_SEPARATOR

    for separator in (DEFAULT_SEPARATOR, "."):
        source, found, _ = tool.partition(separator)
        if found:
            return source
    return "(built in)"


def _served_or_why(source: McpHttpSource, tool: str) -> str:
    from tools.sources import ToolNameError

    try:
        return source.qualified(tool)
    except ToolNameError as exc:
        return f"{tool} (not served: {exc})"


def _settings(config: Path | None) -> Settings:
    from conclave.stack import settings_from
    from tools.sources import ConfigError

    try:
        return settings_from(config)
    except ConfigError as exc:
        _fail(str(exc))


def _open_sources(settings: Settings) -> PythonSources:
    import anyio

    from gateway import PythonSources, open_python_sources
    from tools.sources import load_config

    if settings.config is None:
        return PythonSources((), settings)
    config = load_config(settings.config)
    return anyio.run(open_python_sources, config.source, settings.config.parent, settings)


def _open_stdio(settings: Settings) -> StdioSources:
    """The config's mcp_stdio sources, each started once in a discovery sandbox."""
    import anyio

    from gateway import StdioSources
    from tools import ToolRegistry
    from tools.sources import load_config

    sources = load_config(settings.config).source if settings.config is not None else ()
    stdio = StdioSources(sources, ToolRegistry())
    anyio.run(stdio.open, settings)
    return stdio


def _where(settings: Settings) -> str:
    backend = settings.sandbox.backend
    return f"docker ({settings.sandbox.image})" if backend == "docker" else backend


def _intent(intent: ResourceIntent) -> str:
    return f"{intent.memory_mb} MB, {intent.cpu_seconds:g} s CPU, {intent.timeout_ms} ms"


def _fail(message: str) -> NoReturn:
    for line in message.splitlines():
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(1)
