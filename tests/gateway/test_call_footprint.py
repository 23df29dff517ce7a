"""How much of the product one REST echo call runs through (issue 41): the files a call
executes code in, counted by a profiler hook on this thread and the gateway's threads, on
the in-process gateway (httpx's ASGI transport, the in-process executor, a real Redis).

The count is the seam's measure: a call that crosses more modules than its stages need pays
for each (imports, frames, indirections), and a new concern added to every call shows here
first. A route or stage that needs a new file on the hot path must justify it against this
bound, or keep its work off the path (as policies do when no rule is in force).

The same hook sees every str method a product frame calls: none is called on a tool's
entrypoint (`module:function`), since the resolved tool carries its kind and module."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tests.helpers import in_process_gateway
from tools import default_registry

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = tuple(f"{ROOT / package}/" for package in ("protocol", "tools", "sandbox", "gateway"))
MOST_FILES = 45  # issue 41's goal (68 at b4c62bf)
# The str methods a parse of `module:function` would call, and the text they would be called on.
PARSERS = frozenset({"partition", "rpartition", "split", "rsplit", "find", "rfind", "index"})


async def test_a_rest_echo_call_runs_code_in_at_most_45_product_files_and_parses_no_entrypoint(
    settings: Settings,
) -> None:
    settings = settings.model_copy(update={"sandbox_backend": "inprocess"})
    token = issue_token(settings, tenant="acme", agent="footprint", scopes=["tool:echo"])
    headers = {"Authorization": f"Bearer {token}"}
    body = {"arguments": {"message": "x"}}
    files: set[str] = set()
    parsed: list[str] = []
    entrypoints = {tool.entrypoint for tool in default_registry}  # echo's among them

    def seen(frame: FrameType, event: str, arg: Any) -> None:
        if frame.f_code.co_filename.startswith(PRODUCT):
            files.add(frame.f_code.co_filename)
            # A str method called on an entrypoint: the tool's kind or module read from it
            # again, where the resolved tool carries both (issue 41).
            if event == "c_call" and getattr(arg, "__name__", "") in PARSERS:
                text = getattr(arg, "__self__", None)
                if isinstance(text, str) and text in entrypoints:
                    parsed.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {text}")

    async with in_process_gateway(settings) as client:
        for _ in range(3):  # warm: caches, scripts, connections, the estimate
            assert (await client.post("/v1/tools/echo/call", json=body, headers=headers)).is_success
        sys.setprofile(seen)
        threading.setprofile(seen)
        try:
            answer = await client.post("/v1/tools/echo/call", json=body, headers=headers)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    assert answer.status_code == 200, answer.text
    ran = sorted(str(Path(f).relative_to(ROOT)) for f in files)
    assert len(ran) <= MOST_FILES, ran
    assert "gateway/http/routes/tool_routes.py" in ran  # the hook saw the call
    assert parsed == []
