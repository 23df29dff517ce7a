"""`GET /metrics`: the app's Prometheus registry in the text exposition format."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter(tags=["metrics"])


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    payload = generate_latest(request.app.state.metrics.registry)
    return Response(payload, media_type=CONTENT_TYPE_LATEST)
