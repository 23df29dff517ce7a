"""The console's HTML: one page frame, tables and forms, every value through `html.escape`.

Server-rendered strings, no template engine and no JavaScript build: the only script is the
live feed's few lines of EventSource; charts are inline SVG (`chart_svg`).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from fastapi.responses import HTMLResponse

NAV = (
    ("agents", "/console/agents", "Agents"),
    ("tools", "/console/tools", "Tools"),
    ("feed", "/console/feed", "Live feed"),
    ("namespaces", "/console/namespaces", "Namespaces"),
    ("chains", "/console/chains", "Chains"),
    ("sandboxes", "/console/sandboxes", "Sandboxes"),
    ("charts", "/console/charts", "Charts"),
    ("try", "/console/try", "Try a tool"),
    ("approvals", "/console/approvals", "Approvals"),
    ("quotas", "/console/quotas", "Quotas"),
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
nav { background: #223; padding: 0.6rem 1.5rem; } nav a { color: #dde; margin-right: 1.2rem; }
nav a.here { color: #fff; font-weight: bold; } main { padding: 1rem 1.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; }
th { background: #f3f3f3; } .refused, .failed, .open, .revoked { color: #b00; }
.ok, .closed { color: #070; } form.inline { display: inline; } .note { color: #666; }
button.link { background: none; border: none; color: #dde; text-decoration: underline;
  cursor: pointer; font: inherit; padding: 0; }
"""


# A POST (ending the session on the server), styled as the links beside it.
_LOGOUT = (
    '<form class="inline" method="post" action="/console/logout">'
    '<button class="link">Log out</button></form>'
)


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def table(
    columns: Sequence[str], rows: Iterable[Sequence[object]], *, raw: int = 0, body_id: str = ""
) -> str:
    """A table of escaped cells; the last `raw` columns hold markup this module built.
    `body_id`: an id for its tbody, which a script adds rows to."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        plain = len(row) - raw
        cells = [_cell(v) for v in row[:plain]] + [f"<td>{v}</td>" for v in row[plain:]]
        body.append("<tr>" + "".join(cells) + "</tr>")
    if not body and not body_id:
        body.append(f'<tr><td colspan="{len(columns)}" class="note">none</td></tr>')
    tbody = f'<tbody id="{esc(body_id)}">' if body_id else "<tbody>"
    return f"<table><thead><tr>{head}</tr></thead>{tbody}{''.join(body)}</tbody></table>"


def _cell(value: object) -> str:
    text = f"{value:,.1f}" if isinstance(value, float) else esc(value)
    css = text if text in ("ok", "refused", "failed", "open", "closed", "revoked") else ""
    return f'<td class="{css}">{text}</td>' if css else f"<td>{text}</td>"


def post_button(action: str, label: str, form_token: str, **fields: str) -> str:
    """A one-button form posting `fields` and the session's form token to `action`."""
    hidden = "".join(
        f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
        for k, v in {**fields, "form_token": form_token}.items()
    )
    return (
        f'<form class="inline" method="post" action="{esc(action)}">{hidden}'
        f"<button>{esc(label)}</button></form>"
    )


def page(
    here: str, title: str, body: str, *, status_code: int = 200, refresh_s: int | None = None
) -> HTMLResponse:
    """`body` (markup) in the console's frame, with `here` marked in the navigation;
    `refresh_s`: the browser reloads it that often (a page that changes, with no script)."""
    links = "".join(
        f'<a href="{url}"{" class=here" if name == here else ""}>{esc(label)}</a>'
        for name, url, label in NAV
    )
    links += _LOGOUT if here != "login" else ""
    document = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        + (f"<meta http-equiv='refresh' content='{refresh_s}'>" if refresh_s else "")
        + f"<title>Conclave console: {esc(title)}</title><style>{_STYLE}</style></head>"
        f"<body><nav>{links}</nav><main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )
    headers = {"Cache-Control": "no-store"}  # the security headers: console_headers
    return HTMLResponse(document, status_code=status_code, headers=headers)
