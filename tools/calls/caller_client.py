"""`CallerClient`: what the calling client may be asked during a call, filled at the edge.

A tool's server may ask the client that made the call (sampling, elicitation, roots: MCP's
requests to the client). Whether it may, and what a retry already answers, is known only
where the MCP request entered the gateway; the call carries it as this one optional part of
its `Invocation` (None: nothing is known, as for a REST call), and an executor reads it, never
a revision's wire. Asking itself goes through the call's `events` (`CallEvents.request`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol import InputAnswer


@dataclass(frozen=True)
class CallerClient:
    """`declared`: the client features the request declared, where its wire carries them with
    each request (None: it does not; a server is then checked against nothing here).
    `answer`: a retry's answers to what the tool's server asked in its last round of
    questions, with the server's own state: for the server, and it alone."""

    declared: Mapping[str, Any] | None = None
    answer: InputAnswer | None = None


NO_CLIENT = CallerClient()  # nothing known of the client: what a reader takes for None
