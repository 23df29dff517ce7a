"""`conclave sandbox ...`: build the runtime image, remove what crashed gateways left behind."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from conclave.cli.terminal import cli_console

if TYPE_CHECKING:
    from gateway import Settings

sandbox_app = typer.Typer(no_args_is_help=True, help="Sandboxes: runtime image, cleanup.")
console = cli_console(stderr=True)


@sandbox_app.command("build-image")
def build_image(
    force: Annotated[bool, typer.Option(help="rebuild even when the image is current")] = False,
    mirror: Annotated[
        str | None, typer.Option(help="Debian mirror for debootstrap (default: apt's)")
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="where wheels are kept (default ~/.cache/conclave)")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="conclave.toml: also build each python source's requirements layer"),
    ] = None,
) -> None:
    """Build the docker backend's runtime image (Python 3.11 + pydantic), no registry needed;
    with --config, then a layer per python source with its requirements."""
    from conclave.stack import settings_from
    from sandbox import ImageBuildError, RuntimeImageBuilder
    from tools.sources import ConfigError

    try:
        settings = settings_from(config)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            console.print(f"[red]build-image:[/] {line}", markup=False)
        raise typer.Exit(1) from exc
    began = time.monotonic()
    builder = RuntimeImageBuilder(
        settings.engine_hosts[0],
        settings.sandbox.image,
        cache_dir=cache_dir,
        mirror=mirror,
        say=lambda line: console.print(f"[bold]build-image[/] {line}"),
    )
    try:
        built = builder.build(force=force)
        for other_engine in settings.engine_hosts[1:]:  # CONCLAVE_DOCKER_HOSTS: each gets it
            builder.copy_to(other_engine)
    except ImageBuildError as exc:
        console.print(f"[red]build-image failed:[/] {exc}")
        raise typer.Exit(1) from exc
    if built:
        console.print(f"built {settings.sandbox.image} in {time.monotonic() - began:.1f} s")
    if settings.config is not None and not _prepare_sources(settings, cache_dir):
        raise typer.Exit(1)


def _prepare_sources(settings: Settings, cache_dir: Path | None) -> bool:
    """Build every python source's layer (and check it imports); False if one cannot."""
    import anyio

    from gateway import StdioSources, open_python_sources
    from tools import ToolRegistry
    from tools.sources import load_config

    assert settings.config is not None
    on_docker = settings.model_copy(update={"sandbox_backend": "docker"})
    sources = load_config(settings.config).source
    found = anyio.run(open_python_sources, sources, settings.config.parent, on_docker, cache_dir)
    for report in found.reports:
        if report.error is not None:
            console.print(f"source {report.name}: cannot be served: {report.error}", markup=False)
        else:
            console.print(f"source {report.name}: {len(report.tools)} tools ready")
    stdio = StdioSources(sources, ToolRegistry())  # mcp_stdio: their layers, and a start
    ready = anyio.run(stdio.open, found.sandbox_settings, cache_dir)
    for source in stdio.sources:
        why = stdio.refused.get(source.name)
        line = f"cannot be served: {why}" if why else "ready"
        console.print(f"source {source.name}: {line}", markup=False)
    console.print(f"sources' image: {ready.sandbox.image}")
    return all(report.error is None for report in found.reports) and not stdio.refused


@sandbox_app.command("gc")
def gc(
    everything: Annotated[
        bool, typer.Option("--all", help="also remove sandboxes of running gateways")
    ] = False,
) -> None:
    """Remove sandbox containers, cgroups and workspaces whose gateway is gone."""
    from gateway import Settings
    from sandbox import collect_orphans

    settings = Settings()
    for host in settings.engine_hosts:
        for line in collect_orphans(host, include_live_owners=everything):
            console.print(line)
