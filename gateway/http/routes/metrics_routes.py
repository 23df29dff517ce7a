"""`GET /metrics`: the app's Prometheus registry in the text exposition format.

It names every tool called, so it is closed by default (`Settings.metrics_key` says why):
the admin key (its header, or as a bearer) or the metrics key (as a bearer) opens it, unless
`metrics_public` is set.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.config import Settings, app_settings
from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from protocol import ADMIN_KEY_HEADER, ErrorCode

router = APIRouter(tags=["metrics"])


def _matches(presented: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(presented.encode(), expected.encode())


def _may_read_metrics(request: Request, settings: Settings) -> bool:
    if settings.metrics_public:
        return True
    admin_key = settings.admin_key.get_secret_value()
    if _matches(request.headers.get(ADMIN_KEY_HEADER, ""), admin_key):
        return True
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return _matches(bearer, settings.metrics_key.get_secret_value()) or _matches(bearer, admin_key)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    settings: Settings = app_settings(request.app)
    if not _may_read_metrics(request, settings):
        raise GatewayError.of(
            ErrorCode.ADMIN_REQUIRED,
            "metrics are for operators: send CONCLAVE_METRICS_KEY (or the admin key) as"
            f" 'Authorization: Bearer', or the admin key in {ADMIN_KEY_HEADER};"
            " CONCLAVE_METRICS_PUBLIC=true opens them",
        )
    payload = generate_latest(gateway_parts(request.app).metrics.registry)
    return Response(payload, media_type=CONTENT_TYPE_LATEST)
