"""The console's "try this tool" form: pick a tool and a registered agent, fill the tool's
arguments, and call it through the whole pipeline as that agent.

The call is the agent's own in every stage: the console asks the agent directory for a
token of the agent's current registration (`AgentDirectory.issue`: its scopes, its
generation, living `TOKEN_TTL_S`), which never leaves the server, and runs the pipeline with
it, so authenticate, authorize (the agent's allow-list), budget (its rate limit, the
revocation check, ATBA), dispatch (its own sandbox) and account apply as to any call it makes.
The audit record names the agent, transport `console`, and `acted_by` "admin (console)".
The answer shows the tool's result or the SERF error, its code first.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.cancellation import CallCancel
from gateway.gateway_error import GatewayError
from gateway.http.console.argument_fields import arguments_of, fields_html
from gateway.http.console.page_layout import esc, page
from gateway.http.gateway_parts import gateway_parts
from gateway.identity import AgentDirectory
from gateway.pipeline import Pipeline, RequestContext
from protocol import SerfError
from tools import RegisteredTool, ToolRegistry, ToolResult

ACTED_BY = "admin (console)"
TOKEN_TTL_S = 60
MAX_SHOWN_CHARS = 20_000  # a page, not a dump: a longer answer is cut, saying so


def _tool(request: Request, name: str) -> RegisteredTool | None:
    registry: ToolRegistry = gateway_parts(request.app).registry
    return next((t for t in registry if t.name == name), None)


def _chooser(tools: list[str], chosen: str) -> str:
    options = "".join(
        f'<option value="{esc(n)}"{" selected" if n == chosen else ""}>{esc(n)}</option>'
        for n in tools
    )
    return (
        '<form method="get" action="/console/try"><label>Tool <select name="tool">'
        f"{options}</select></label> <button>Choose</button></form>"
    )


async def _agent_options(request: Request, chosen: str) -> str:
    directory: AgentDirectory = gateway_parts(request.app).agents
    names = [f"{r.tenant}/{r.agent}" for r in await directory.list() if not r.revoked]
    return "".join(
        f'<option value="{esc(n)}"{" selected" if n == chosen else ""}>{esc(n)}</option>'
        for n in names
    )


def _shown(value: Any) -> str:
    text = json.dumps(value, indent=2, default=str)
    if len(text) > MAX_SHOWN_CHARS:
        text = text[:MAX_SHOWN_CHARS] + f"\n... ({len(text)} characters, cut)"
    return esc(text)


def _outcome_html(ctx: RequestContext) -> str:
    if ctx.error is not None:
        return _error_html(ctx.error, "Failed" if ctx.executed else "Refused")
    output: ToolResult = ctx.result
    answer = {
        "result": output.value,
        "content": output.content,
        "structured_content": output.structured,
        "usage": ctx.usage.model_dump(mode="json") if ctx.usage else None,
        "trace_id": ctx.trace_id,
    }
    return f'<h2 class="ok">Result</h2><pre id="result">{_shown(answer)}</pre>'


def _error_html(error: SerfError, how: str = "Refused") -> str:
    return (
        f'<h2 class="refused">{how}: <code id="error-code">{esc(error.code.value)}</code></h2>'
        f"<p>{esc(error.message)}</p>"
        f'<pre id="error">{_shown(error.model_dump(mode="json"))}</pre>'
    )


async def try_page(
    request: Request,
    form_token: str,
    tool_name: str,
    posted: dict[str, str] | None = None,
    outcome: str = "",
) -> HTMLResponse:
    registry: ToolRegistry = gateway_parts(request.app).registry
    names = sorted(t.name for t in registry)
    chosen = tool_name if tool_name in names else (names[0] if names else "")
    body = _chooser(names, chosen)
    tool = _tool(request, chosen)
    if tool is not None:
        posted = posted or {}
        agents = await _agent_options(request, posted.get("agent", ""))
        body += (
            f"<h2>{esc(tool.name)}</h2><p>{esc(tool.spec.description)}</p>"
            '<form method="post" action="/console/try" id="try">'
            f'<input type="hidden" name="tool" value="{esc(tool.name)}">'
            f'<input type="hidden" name="form_token" value="{esc(form_token)}">'
            f'<p><label>As agent <select name="agent">{agents}</select></label></p>'
            + fields_html(tool.spec.input_schema, posted)
            + "<p><button>Call</button></p></form>"
        )
    body += outcome
    body += (
        '<p class="note">The call runs through every stage as the chosen agent (its rights,'
        " rate limit and sandbox); the audit records it as the agent's, made by an admin"
        " from the console. No agent listed: register one (POST /v1/agents).</p>"
    )
    return page("try", "Try a tool", body)


async def call_as_agent(request: Request, form: dict[str, str]) -> str:
    """Call the posted tool as the posted agent; the outcome as markup."""
    tool = _tool(request, form.get("tool", ""))
    tenant, _, agent = form.get("agent", "").partition("/")
    directory: AgentDirectory = gateway_parts(request.app).agents
    try:
        token = await directory.issue(tenant, agent, ttl_s=TOKEN_TTL_S)
    except GatewayError as exc:  # not registered, or revoked: nothing to call as
        return _error_html(exc.error)
    name = tool.name if tool is not None else form.get("tool", "")
    ctx = RequestContext(
        "console",
        name,
        {"authorization": f"Bearer {token.token}"},
        tool_name=name,
        acted_by=ACTED_BY,
    )
    try:
        schema = tool.spec.input_schema if tool is not None else {}
        ctx.arguments = arguments_of(schema, form)
    except GatewayError as exc:  # refused by the scope stage, once the agent is known
        ctx.input_error = exc
    else:
        ctx.cancel = CallCancel()
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    await pipeline.run(ctx)
    return _outcome_html(ctx)
