"""From an approval on one replica to the held call's answer on another.

Two gateways (processes of their own, one Redis) with an approve rule for `echo` calls whose
message starts with "hold". Each round a caller's call goes to the first and is held; an
approver lists the pending approvals on the second until the call shows, then approves it
there; the figure is from sending the approval to the caller's answer on the first (the
release through Redis, the echo and both HTTP answers: an upper bound of the held call's
start).
"""

from __future__ import annotations

import json
import time

import anyio

from conclave.bench.core import Http1Connection, encode_request
from conclave.stack import EmbeddedStack
from protocol import DEADLINE_HEADER

TENANT = "bench-approvals"
RULE = f"""
[[policy]]
name = "bench-hold"
tenants = ["{TENANT}"]
tools = ["echo"]
when = 'args.message.startsWith("hold")'
outcome = "approve"
reason = "the governance bench's held calls"
approval_ttl_s = 60
"""
_LISTED_WITHIN_S = 10.0


def release_samples(holder: EmbeddedStack, decider: EmbeddedStack, rounds: int) -> list[float]:
    """`rounds` releases (ms), each a call held on `holder` and approved on `decider`."""
    caller = {"Authorization": f"Bearer {holder.token(TENANT, 'payer', ['tool:echo'])}"}
    approver = {"Authorization": f"Bearer {decider.token(TENANT, 'approver', ['approve:echo'])}"}
    listing = encode_request("GET", decider.url, "/v1/approvals", approver)

    async def one_round(i: int, calling: Http1Connection, deciding: Http1Connection) -> float:
        deadline = {DEADLINE_HEADER: str(int((time.time() + 30) * 1000))}
        body = json.dumps({"arguments": {"message": f"hold {i:05d}"}}).encode()
        call = encode_request("POST", holder.url, "/v1/tools/echo/call", {**caller, **deadline},
                              body)  # fmt: skip
        answered: list[tuple[int, bytes]] = []
        done = anyio.Event()

        async def held() -> None:
            answered.append(await calling.request(call))
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(held)
            path = f"/v1/approvals/{await _pending(deciding, listing)}/approve"
            approve = encode_request("POST", decider.url, path, approver, b"{}")
            began = time.perf_counter()
            status, answer = await deciding.request(approve)
            if status != 200:
                raise RuntimeError(f"the bench's approval was refused: {answer[:300]!r}")
            await done.wait()
            took = (time.perf_counter() - began) * 1000
        status, answer = answered[0]
        if status != 200:
            raise RuntimeError(f"an approved bench call failed: {answer[:300]!r}")
        return took

    async def measure() -> list[float]:
        calling, deciding = Http1Connection(holder.url), Http1Connection(decider.url)
        try:
            return [await one_round(i, calling, deciding) for i in range(rounds)]
        finally:
            await calling.aclose()
            await deciding.aclose()

    return anyio.run(measure, backend_options={"use_uvloop": True})


async def _pending(deciding: Http1Connection, listing: bytes) -> str:
    """The id of the one approval pending, once the held call shows on this replica."""
    stop = time.perf_counter() + _LISTED_WITHIN_S
    while time.perf_counter() < stop:
        status, answer = await deciding.request(listing)
        if status != 200:
            raise RuntimeError(f"the bench's approver cannot list: {answer[:300]!r}")
        found = json.loads(answer)["approvals"]
        if found:
            approval_id: str = found[0]["id"]
            return approval_id
        await anyio.sleep(0.002)
    raise RuntimeError(f"no held call showed within {_LISTED_WITHIN_S:g} s")
