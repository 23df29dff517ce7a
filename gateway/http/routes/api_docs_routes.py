"""`GET /docs`: the interactive API documentation (Swagger UI on `/openapi.json`), served
from the gateway itself.

FastAPI's own `/docs` loads Swagger UI from a CDN, so on a machine without internet (or
behind a proxy that blocks it) the page is blank. The UI's files ship in the package
(`gateway/http/static/swagger-ui`, swagger-ui-dist 5, Apache-2.0: its LICENSE beside it), and
the page's Content-Security-Policy allows scripts and styles from this origin only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

router = APIRouter(include_in_schema=False)

_FILES = Path(__file__).resolve().parents[1] / "static" / "swagger-ui"
# The page's only assets: a fixed table, so no request path ever names a file to open.
_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "init.js": "text/javascript",
}
_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Conclave gateway: API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>"""
# Swagger UI sets inline styles and shows data: images; it fetches only /openapi.json.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self';"
    " frame-ancestors 'none'"
)
_HEADERS = {"Content-Security-Policy": _POLICY, "X-Content-Type-Options": "nosniff"}


@router.get("/docs")
async def api_docs() -> HTMLResponse:
    return HTMLResponse(_PAGE, headers=_HEADERS)


@router.get("/docs/{asset}")
async def api_docs_asset(asset: str) -> FileResponse:
    media_type = _ASSETS.get(asset)
    if media_type is None:
        raise HTTPException(status_code=404)  # answered as every unknown path is
    cached = {**_HEADERS, "Cache-Control": "public, max-age=86400"}
    return FileResponse(_FILES / asset, media_type=media_type, headers=cached)
