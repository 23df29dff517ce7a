"""The gateway's parts are one frozen value the assembly builds, read through `gateway_parts`,
never attributes of `app.state` read by name."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings, app_settings
from gateway.http import GatewayParts, gateway_parts
from gateway.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[3]
# The two accessors, and the console's count of its open live feeds (kept as it runs, per app).
READ_THROUGH_STATE = {
    "gateway/http/gateway_parts.py",
    "gateway/config/app_settings.py",
    "gateway/http/console/feed_view.py",
}


def _state_reads(path: Path) -> list[str]:
    """Each `app.state` / `<x>.app.state` in `path`, as file:line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.Attribute) or node.attr != "state":
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "app") or (
            isinstance(owner, ast.Attribute) and owner.attr == "app"
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_part_is_read_from_app_state_by_name() -> None:
    paths = [
        *sorted((ROOT / "gateway").rglob("*.py")),
        ROOT / "conclave" / "stack" / "gateway_process.py",
    ]
    reads = [
        read
        for path in paths
        if str(path.relative_to(ROOT)) not in READ_THROUGH_STATE
        for read in _state_reads(path)
    ]
    assert not reads, "read these through gateway_parts(app) or app_settings(app):\n" + "\n".join(
        reads
    )


@pytest.mark.anyio
async def test_the_lifespan_builds_one_frozen_value_of_the_parts(
    settings: Settings, redis: Redis
) -> None:
    app = create_app(settings.model_copy(update={"sandbox_backend": "inprocess"}))
    assert app_settings(app).redis_url == settings.redis_url  # known before the lifespan
    with pytest.raises(RuntimeError, match="start the app first"):
        gateway_parts(app)
    async with app.router.lifespan_context(app):
        parts = gateway_parts(app)
        assert isinstance(parts, GatewayParts) and isinstance(parts.pipeline, Pipeline)
        assert parts.sandbox_name == "inprocess" and "echo" in parts.registry
        with pytest.raises(dataclasses.FrozenInstanceError):
            parts.pipeline = parts.pipeline  # type: ignore[misc]
