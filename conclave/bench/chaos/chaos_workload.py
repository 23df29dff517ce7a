"""The callers of `conclave bench chaos`: committers, lease takers and tool callers, all over
HTTP through the gateways' load balancer, each request's outcome written down client-side.

Every request is booked under the phase (the fault) that was current when it started. A
failure is booked by its SERF code, or as "no answer" when nothing answered in SERF (a
dropped connection, a timeout, the balancer's own 502). Committers write a fresh key per
commit with an idempotency key and retry it (same key) until it is acknowledged; the
acknowledgement is recorded with the version it got, so the end can check it was kept.
Lease takers take and release one fenced key in turn; every grant is recorded with its token.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from protocol import DEADLINE_HEADER

NO_ANSWER = "no answer"
DEADLINE_S = 2.0  # each caller's deadline per request
LATE_S = DEADLINE_S + 1.0  # an answer (or failure) after this waited past deadline + 1 s
CLIENT_TIMEOUT_S = DEADLINE_S + 3.0  # so a late answer is seen, not cut at the deadline
RETRY_PAUSE_S = 0.1
SAMPLES = 4  # unanswered or late requests kept per phase, to say what they were
FENCED_KEY = "fence"


@dataclass
class PhaseLog:
    """What the callers saw while one phase (a fault, or the calm before) was current."""

    ok: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # SERF code (or NO_ANSWER) -> count
    late: int = 0  # requests that took past deadline + 1 s
    first_ok_at: dict[str, float] = field(default_factory=dict)  # kind -> first success
    samples: list[str] = field(default_factory=list)  # a few unanswered or late requests


@dataclass
class Ack:
    namespace: str
    key: str
    version: int
    phase: str
    at: float  # monotonic time of the acknowledgement


@dataclass
class Recorder:
    phase: str = "calm"
    phases: dict[str, PhaseLog] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)
    grants: list[tuple[str, int, str, str]] = field(default_factory=list)  # key, token, who, phase

    def log(self, phase: str) -> PhaseLog:
        return self.phases.setdefault(phase, PhaseLog())

    def book(
        self, phase: str, kind: str, started: float, code: str | None, detail: str = ""
    ) -> None:
        """One request's outcome: `code` None for a success; `kind` commit, lease or tool;
        `detail` says what came back, kept for a few unanswered or late requests."""
        entry = self.log(phase)
        now = time.monotonic()
        late = now - started > LATE_S
        if late:
            entry.late += 1
        if (late or code == NO_ANSWER) and len(entry.samples) < SAMPLES:
            entry.samples.append(f"{kind} {code or 'ok'} after {now - started:.1f} s: {detail}")
        if code is None:
            entry.ok += 1
            entry.first_ok_at.setdefault(kind, now)
        else:
            entry.failed[code] += 1


def serf_code(response: httpx.Response) -> str:
    """The SERF code of a refusal, or NO_ANSWER when the body is not a SERF error."""
    try:
        body = response.json()
    except ValueError:
        return NO_ANSWER
    code = body.get("code") if isinstance(body, dict) else None
    return str(code) if isinstance(code, str) else NO_ANSWER


class Callers:
    """The suite's callers on one gateway URL, booking into one `Recorder`."""

    def __init__(self, url: str, recorder: Recorder, headers: dict[str, dict[str, str]]) -> None:
        self.url = url
        self.recorder = recorder
        self.headers = headers  # agent name -> its Authorization header
        self.stopping = False

    async def request(
        self,
        client: httpx.AsyncClient,
        kind: str,
        method: str,
        path: str,
        agent: str,
        **kwargs: Any,
    ) -> httpx.Response | None:
        """One request, booked; the response when it was a success, else None."""
        phase, started = self.recorder.phase, time.monotonic()
        headers = dict(self.headers[agent])
        headers[DEADLINE_HEADER] = str(int((time.time() + DEADLINE_S) * 1000))
        try:
            response = await client.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as error:
            detail = f"{method} {path}: {type(error).__name__} {error}"
            self.recorder.book(phase, kind, started, NO_ANSWER, detail)
            return None
        detail = f"{method} {path}: {response.status_code} {response.text[:100]}"
        if response.is_success:
            self.recorder.book(phase, kind, started, None, detail)
            return response
        self.recorder.book(phase, kind, started, serf_code(response), detail)
        return response if response.status_code in (404, 409) else None

    async def committer(self, agent: str, namespace: str, run_id: str) -> None:
        """Commit a fresh key at a time, retrying each (same idempotency key) until acked."""
        async with self._client() as client:
            seq = 0
            while not self.stopping:
                seq += 1
                key = f"{agent}-{seq}"
                body = {
                    "writes": [{"key": key, "value": seq}],
                    "idempotency_key": f"{run_id}-{key}",
                }
                while not self.stopping:
                    path = f"/v1/state/{namespace}/commit"
                    answer = await self.request(client, "commit", "POST", path, agent, json=body)
                    if answer is not None and answer.is_success:
                        version = int(answer.json()["versions"][key])
                        self.recorder.acks.append(
                            Ack(namespace, key, version, self.recorder.phase, time.monotonic())
                        )
                        break
                    await anyio.sleep(RETRY_PAUSE_S)

    async def lease_taker(self, agent: str, namespace: str) -> None:
        """Take the fenced key (short TTL), record the token, release it; again."""
        async with self._client() as client:
            while not self.stopping:
                body = {"keys": [FENCED_KEY], "ttl_ms": 1000}
                path = f"/v1/state/{namespace}/leases"
                answer = await self.request(client, "lease", "POST", path, agent, json=body)
                if answer is None or not answer.is_success:
                    await anyio.sleep(RETRY_PAUSE_S)
                    continue
                token = int(answer.json()["leases"][0]["fencing_token"])
                self.recorder.grants.append((FENCED_KEY, token, agent, self.recorder.phase))
                release = f"/v1/state/{namespace}/leases/{FENCED_KEY}"
                await self.request(client, "lease", "DELETE", release, agent)

    async def tool_caller(self, agent: str) -> None:
        async with self._client() as client:
            while not self.stopping:
                call = {"arguments": {"message": "chaos"}}
                path = "/v1/tools/echo/call"
                answer = await self.request(client, "tool", "POST", path, agent, json=call)
                if answer is None:
                    await anyio.sleep(RETRY_PAUSE_S)

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=CLIENT_TIMEOUT_S)


def reissued_tokens(grants: list[tuple[str, int, str, str]]) -> Counter[str]:
    """Per phase: grants of a (key, token) an earlier grant gave another holder (a holder
    taking its own lease again, after its release went unanswered, renews the same token)."""
    holders: dict[tuple[str, int], str] = {}
    reissued: Counter[str] = Counter()
    for key, token, holder, phase in grants:
        if holders.setdefault((key, token), holder) != holder:
            reissued[phase] += 1
    return reissued
