"""The conformance proxy's name mapping: the suite calls the fixture's own names, Conclave
serves them under the source's prefix; requests gain it, listings lose it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest

from conclave.bench.mcp.token_proxy import TokenProxy

PREFIX = "fx__"


@pytest.fixture
def proxy() -> Iterator[TokenProxy]:
    made = TokenProxy("http://127.0.0.1:9", "t", rename_prefix=PREFIX)
    yield made
    anyio.run(made.client.aclose)


def _call(method: str, params: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def test_a_call_gains_the_prefix_and_a_listing_names_the_list_to_strip(proxy: TokenProxy) -> None:
    body, listing = proxy._renamed_request(_call("tools/call", {"name": "add", "arguments": {}}))
    assert json.loads(body)["params"]["name"] == "fx__add" and listing is None
    prompt = {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {}}
    body, _ = proxy._renamed_request(_call("completion/complete", prompt))
    assert json.loads(body)["params"]["ref"]["name"] == "fx__greet"
    untouched = _call("resources/read", {"uri": "test://x"})
    assert proxy._renamed_request(untouched) == (untouched, None)
    assert proxy._renamed_request(b"not json") == (b"not json", None)
    _, listing = proxy._renamed_request(_call("tools/list", {}))
    assert listing == "tools"


def test_a_listing_loses_the_prefix_in_json_and_in_sse(proxy: TokenProxy) -> None:
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "fx__add"}, {"x": 1}]}}
    plain = proxy._renamed_listing(json.dumps(answer).encode(), "tools")
    assert json.loads(plain)["result"]["tools"][0]["name"] == "add"
    events = b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"
    streamed = proxy._renamed_listing(events, "tools")
    data = next(line for line in streamed.split(b"\n") if line.startswith(b"data:"))
    assert json.loads(data[5:])["result"]["tools"][0]["name"] == "add"
    assert proxy._renamed_listing(b"{broken", "tools") == b"{broken"
