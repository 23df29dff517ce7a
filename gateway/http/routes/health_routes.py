"""Liveness and readiness. A Redis that does not answer makes /readyz a SERF 503."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> dict[str, Any]:
    await request.app.state.redis.ping()  # connection errors become STATE_UNAVAILABLE
    return {"status": "ready", "redis": "ok", "sandbox": request.app.state.sandbox_name}
