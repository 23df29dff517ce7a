"""A FastMCP server whose tool reports progress and logs while it runs, for the streaming
tests.

Run as a script (`python reporting_upstream.py --port N`), in its own process. It answers
each call as an event stream (not `json_response`), so its notifications travel on the
call's own answer: `report` sends progress 1/2 and 2/2 (for the call's `progressToken`) and
a log message at each of debug, info and warning, then answers "reported".
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from fastmcp import Context, FastMCP


def build_app() -> Any:
    server = FastMCP("reporting")

    @server.tool
    async def report(ctx: Context) -> str:
        """Progress twice, three log messages, then the answer."""
        await ctx.report_progress(1, 2, "half way")
        await ctx.report_progress(2, 2, "done")
        await ctx.debug("upstream says debug")
        await ctx.info("upstream says info")
        await ctx.warning("upstream says warning")
        return "reported"

    return server.http_app(path="/mcp", stateless_http=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    uvicorn.run(build_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
