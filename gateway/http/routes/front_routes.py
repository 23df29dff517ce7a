"""`GET /`: the gateway's front door, a small page linking to the console (`/console`), the
API's documentation (`/docs`, and `/openapi.json`), health and metrics; the same links as
JSON for a client that asks for `application/json` and not for HTML.

The page is static: no script, nothing fetched, so its Content-Security-Policy allows only
its inline style.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse

router = APIRouter(include_in_schema=False)

LINKS = (
    ("console", "/console", "The console: agents, tools, live feed, charts, try a tool"),
    ("docs", "/docs", "API documentation (OpenAPI, interactive)"),
    ("openapi", "/openapi.json", "The OpenAPI document"),
    ("mcp", "/mcp", "MCP endpoint (Streamable HTTP; an agent's bearer token)"),
    ("health", "/healthz", "Liveness; /readyz for readiness"),
    ("metrics", "/metrics", "Prometheus metrics"),
)
_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Conclave gateway</title>
<style>body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
li {{ margin: 0.3rem 0; }}</style></head><body><h1>Conclave gateway</h1>
<p>The broker every agent request goes through: tools in sandboxes, shared state with write
ownership, budgets and audit.</p><ul>{items}</ul></body></html>"""
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline';"
    " base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def _wants_json(accept: str) -> bool:
    kinds = {part.split(";")[0].strip() for part in accept.lower().split(",")}
    return "application/json" in kinds and "text/html" not in kinds


@router.get("/")
async def front_page(request: Request) -> Response:
    if _wants_json(request.headers.get("accept", "")):
        body = {"name": "Conclave gateway", "links": {name: url for name, url, _ in LINKS}}
        return JSONResponse(body, headers=_HEADERS)
    items = "".join(f'<li><a href="{url}">{url}</a>: {text}</li>' for _, url, text in LINKS)
    return HTMLResponse(_PAGE.format(items=items), headers=_HEADERS)
