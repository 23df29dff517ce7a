"""The MCP server the official conformance suite's server scenarios expect, for its runs.

`@modelcontextprotocol/conformance` (npm) tests a server by calling fixed names: the tools
`test_simple_text`, `test_image_content`, ... `test_reconnection`, `json_schema_2020_12_tool`
(and the 0.2 line's `test_missing_capability`, which needs the client's sampling);
the resources `test://static-text`, `test://static-binary`, `test://watched-resource` and the
template `test://template/{id}/data`; the prompts `test_simple_prompt`,
`test_prompt_with_arguments`, `test_prompt_with_embedded_resource`, `test_prompt_with_image`;
`completion/complete`, `logging/setLevel` and `resources/subscribe|unsubscribe`. This server
serves each as the scenario's description asks (FastMCP, no logic of its own), so a scenario
that fails against Conclave with this server behind it names a gap in Conclave.

Run over streamable HTTP (`--port N`: stateful sessions, SSE answers, an in-memory event
store so a closed stream resumes) or over stdio (`--stdio`). It lives in `tools.harness` so
an `mcp_stdio` source can start it by path inside a sandbox, which mounts `tools`
(/opt/conclave/code/tools/harness/conformance_server.py); it needs `fastmcp`, which bwrap and
process sandboxes find in the host's interpreter. It is not a tool module.
"""

from __future__ import annotations

import argparse
import base64
import json
import warnings
from typing import Any

import anyio
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.prompts import Message
from fastmcp.server.event_store import EventStore
from fastmcp.tools import Tool
from mcp import MCPDeprecationWarning, types

# A 1x1 PNG and a WAV header with two bytes of samples: the smallest valid media payloads.
PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg"
    "=="
)
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# Between two notifications of one call, so a client sees them arrive apart.
_STEP_S = 0.05

_SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

_SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Simple enum without titles",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Enum with titled options (oneOf)",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy enum with enumNames",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Multi-select without titles",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Multi-select with titled options",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

_JSON_SCHEMA_TOOL_INPUT: dict[str, Any] = {
    "$schema": JSON_SCHEMA_2020_12,
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")


def _text_resource(uri: str, text: str, mime_type: str = "text/plain") -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> str:
    """Ask the client with exactly `schema` (FastMCP's typed elicit would rewrite it)."""
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


async def _sample(ctx: Context, prompt: str) -> str:
    text_block = types.TextContent(type="text", text=prompt)
    message = types.SamplingMessage(role="user", content=text_block)
    answer = await ctx.session.create_message(
        [message], max_tokens=100, related_request_id=ctx.request_id
    )
    content = answer.content
    text = content.text if isinstance(content, types.TextContent) else "(not text)"
    return f"LLM response: {text}"


def _add_tools(server: FastMCP) -> None:
    @server.tool
    def test_simple_text() -> str:
        """Answers one text block."""
        return "This is a simple text response for testing."

    @server.tool
    def test_image_content() -> list[types.ImageContent]:
        """Answers one image block (a 1x1 PNG)."""
        return [_image()]

    @server.tool
    def test_audio_content() -> list[types.AudioContent]:
        """Answers one audio block (a tiny WAV)."""
        return [types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]

    @server.tool
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        """Answers one embedded text resource."""
        return [_text_resource("test://embedded-resource", "This is an embedded resource content.")]

    @server.tool
    def test_multiple_content_types() -> list[types.ContentBlock]:
        """Answers text, an image and an embedded resource, in that order."""
        data = '{"test":"data","value":123}'
        return [
            types.TextContent(type="text", text="Multiple content types test:"),
            _image(),
            _text_resource("test://mixed-content-resource", data, "application/json"),
        ]

    @server.tool
    async def test_tool_with_logging(ctx: Context) -> str:
        """Sends three info log notifications while it runs."""
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(text)
            await anyio.sleep(_STEP_S)
        return "Tool with logging executed successfully"

    @server.tool
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress 0, 50 and 100 of 100."""
        for done in (0, 50, 100):
            await ctx.report_progress(done, 100, f"Completed step {done} of 100")
            await anyio.sleep(_STEP_S)
        return "Progress reported"

    @server.tool
    def test_error_handling() -> str:
        """Always fails: a tool result with isError and the reason as text."""
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Asks the client's model to answer `prompt` (sampling/createMessage)."""
        return await _sample(ctx, prompt)

    @server.tool
    async def test_missing_capability(ctx: Context) -> str:
        """Needs the client's sampling capability: asks its model (sampling/createMessage),
        so a 2026-07-28 request that declares no `sampling` is refused -32021."""
        return await _sample(ctx, "Say hello")

    @server.tool
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Asks the client's user for a username and an email (elicitation/create)."""
        schema = {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        }
        return await _elicit(ctx, message, schema)

    @server.tool
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Elicits five fields, each with a default (SEP-1034)."""
        return await _elicit(ctx, "Please provide user information", _SEP1034_SCHEMA)

    @server.tool
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Elicits the five enum shapes of SEP-1330."""
        return await _elicit(ctx, "Please select options", _SEP1330_SCHEMA)

    @server.tool
    async def test_reconnection(ctx: Context) -> str:
        """Closes its SSE stream mid-call; the client resumes from the event store."""
        await ctx.info("Before disconnect")
        await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await ctx.info("After reconnect")
        return "Reconnection test completed"

    def json_schema_2020_12_tool(
        name: str | None = None, address: dict[str, Any] | None = None
    ) -> str:
        return f"name={name} address={address}"

    tool = Tool.from_function(
        json_schema_2020_12_tool, description="Tool with JSON Schema 2020-12 features"
    )
    server.add_tool(tool.model_copy(update={"parameters": _JSON_SCHEMA_TOOL_INPUT}))


def _add_resources(server: FastMCP) -> None:
    @server.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        """A static binary resource (a 1x1 PNG)."""
        return base64.b64decode(PNG_BASE64)

    @server.resource("test://watched-resource", mime_type="text/plain")
    def watched() -> str:
        """A resource a client may subscribe to."""
        return "Watched resource content"

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template(id: str) -> str:
        """A resource template: the id substituted into JSON."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


def _add_prompts(server: FastMCP) -> None:
    @server.prompt
    def test_simple_prompt() -> str:
        """A prompt without arguments."""
        return "This is a simple prompt for testing."

    @server.prompt
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with two required arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
        """A prompt whose first message embeds the resource at `resourceUri`."""
        embedded = _text_resource(resourceUri, "Embedded resource content for testing.")
        return [Message(embedded), Message("Please process the embedded resource above.")]

    @server.prompt
    def test_prompt_with_image() -> list[Message]:
        """A prompt whose first message is an image."""
        return [Message(_image()), Message("Please analyze the image above.")]


def _add_protocol_handlers(server: FastMCP) -> None:
    """`completion/complete` and `resources/subscribe|unsubscribe`, which FastMCP does not
    declare itself: registered on its low-level server, which then advertises them."""
    subscribed: set[str] = set()

    async def complete(_: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    async def subscribe(_: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(_: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    low = server._mcp_server
    low.add_request_handler("completion/complete", types.CompleteRequestParams, complete)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


def build_conformance_server() -> FastMCP:
    # Schemas as written: the JSON Schema 2020-12 scenario checks that `$defs` survive.
    server = FastMCP("conclave-conformance-fixture", dereference_schemas=False)
    _add_tools(server)
    _add_resources(server)
    _add_prompts(server)
    _add_protocol_handlers(server)
    return server


def conformance_http_app() -> Any:
    """Streamable HTTP at `/mcp`: sessions (server-to-client requests need one), SSE answers,
    an event store so a stream the server closes mid-call resumes (SEP-1699), and Host and
    Origin checked against loopback names (DNS rebinding)."""
    server = build_conformance_server()
    return server.http_app(
        path="/mcp", event_store=EventStore(), retry_interval=100, host_origin_protection=True
    )


def main() -> None:
    # It uses sampling and logging on purpose: the 2025 scenarios call them.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    parser = argparse.ArgumentParser(description="The conformance suite's fixture MCP server")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout")
    options = parser.parse_args()
    if options.stdio:
        build_conformance_server().run(transport="stdio", show_banner=False)
        return
    import uvicorn

    uvicorn.run(conformance_http_app(), host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
