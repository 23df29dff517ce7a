"""`conclave sandbox ...`: build the runtime image, remove what crashed gateways left behind."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gateway import Settings

sandbox_app = typer.Typer(no_args_is_help=True, help="Sandboxes: runtime image, cleanup.")
console = Console(stderr=True)


@sandbox_app.command("build-image")
def build_image(
    force: Annotated[bool, typer.Option(help="rebuild even when the image is current")] = False,
    mirror: Annotated[
        str | None, typer.Option(help="Debian mirror for debootstrap (default: apt's)")
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="where wheels are kept (default ~/.cache/conclave)")
    ] = None,
) -> None:
    """Build the docker backend's runtime image (Python 3.11 + pydantic), no registry needed."""
    from sandbox import ImageBuildError, RuntimeImageBuilder

    settings = Settings()
    began = time.monotonic()
    builder = RuntimeImageBuilder(
        settings.docker_host,
        settings.sandbox_image,
        cache_dir=cache_dir,
        mirror=mirror,
        say=lambda line: console.print(f"[bold]build-image[/] {line}"),
    )
    try:
        built = builder.build(force=force)
    except ImageBuildError as exc:
        console.print(f"[red]build-image failed:[/] {exc}")
        raise typer.Exit(1) from exc
    if built:
        console.print(f"built {settings.sandbox_image} in {time.monotonic() - began:.1f} s")


@sandbox_app.command("gc")
def gc(
    everything: Annotated[
        bool, typer.Option("--all", help="also remove sandboxes of running gateways")
    ] = False,
) -> None:
    """Remove sandbox containers, cgroups and workspaces whose gateway is gone."""
    from sandbox import collect_orphans

    settings = Settings()
    for line in collect_orphans(settings.docker_host, include_live_owners=everything):
        console.print(line)
