"""The approval webhook (issue 42): an operator's receiver, a real HTTP server, gets a signed
notice of each call held for approval, retried with backoff while it fails; a URL that points
inside the machine is refused unless the operator says it is theirs; a forged, altered or
stale notice does not verify."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from pydantic import SecretStr

from gateway.approvals import sign, verify_signature
from gateway.assembly import ConfigurationError, create_app
from gateway.config import Settings
from tests.gateway.approvals.test_approvals import RULE, bearer_of, deadline_in, pending
from tests.helpers import in_process_gateway, until

pytestmark = pytest.mark.anyio

SECRET = "a-long-random-value-the-receiver-knows"


@dataclass
class Receiver:
    """What an operator's receiver got, and the statuses it answers with, in turn."""

    statuses: list[int]
    url: str = ""
    got: list[tuple[float, dict[str, str], bytes]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.got.append((time.monotonic(), headers, body))
        status = self.statuses.pop(0) if self.statuses else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def receiving(statuses: list[int]) -> AsyncIterator[Receiver]:
    """A receiver served by uvicorn on a loopback port of its own."""
    receiver = Receiver(statuses)
    config = uvicorn.Config(receiver, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        await until(lambda: server.started, 10.0)
        port = server.servers[0].sockets[0].getsockname()[1]
        receiver.url = f"http://127.0.0.1:{port}/approvals"
        yield receiver
        server.should_exit = True


def with_webhook(settings: Settings, tmp_path: Path, url: str, **more: Any) -> Settings:
    config = tmp_path / "conclave.toml"
    config.write_text(RULE)
    return settings.model_copy(
        update={
            "config": config,
            "sandbox_backend": "inprocess",
            "approval_webhook_url": url,
            "approval_webhook_secret": SecretStr(SECRET),
            **more,
        }
    )


async def test_a_held_call_is_told_to_the_receiver_signed_and_retried_until_taken(
    settings: Settings, tmp_path: Path
) -> None:
    async with (
        receiving([503, 503, 200]) as receiver,
        in_process_gateway(
            with_webhook(settings, tmp_path, receiver.url, approval_webhook_private=True)
        ) as gateway,
        anyio.create_task_group() as group,
    ):
        caller = await bearer_of(gateway, settings, "hook-caller", tools=["echo"])
        approver = await bearer_of(gateway, settings, "hook-approver", approves=["echo"])
        answers: list[httpx.Response] = []

        async def call() -> None:
            answers.append(
                await gateway.post(
                    "/v1/tools/echo/call",
                    json={"arguments": {"message": "pay 5,000"}},
                    headers={**caller, **deadline_in(20.0)},
                )
            )

        group.start_soon(call)
        await until(lambda: len(receiver.got) >= 3, 15.0)
        [held] = await pending(gateway, approver)
        times = [at for at, _, _ in receiver.got]
        assert times[1] - times[0] >= 0.5 and times[2] - times[1] >= 1.0  # backed off
        for _, headers, body in receiver.got:
            assert headers["x-conclave-delivery"] == held["id"]  # one notice, three tries
            assert verify_signature(SECRET.encode(), headers["x-conclave-signature"], body)
            notice = json.loads(body)
            assert notice["event"] == "approval.pending"
            assert notice["approval"]["arguments"] == {"message": "pay 5,000"}
            assert notice["approval"]["tool"] == "echo"
            assert notice["approval"]["agent"] == "hook-caller"
            assert notice["approval"]["policy"] == "big-echo"
        decided = await gateway.post(
            f"/v1/approvals/{held['id']}/approve", json={"note": "ok"}, headers=approver
        )
        assert decided.status_code == 200, decided.text
        await until(lambda: bool(answers), 10.0)
        assert answers[0].status_code == 200, answers[0].text
        assert len(receiver.got) == 3  # taken: not sent again


async def test_a_receivers_refusal_is_final(settings: Settings, tmp_path: Path) -> None:
    async with (
        receiving([400]) as receiver,
        in_process_gateway(
            with_webhook(settings, tmp_path, receiver.url, approval_webhook_private=True)
        ) as gateway,
        anyio.create_task_group() as group,
    ):
        caller = await bearer_of(gateway, settings, "hook-caller-2", tools=["echo"])
        approver = await bearer_of(gateway, settings, "hook-approver-2", approves=["echo"])

        async def call() -> None:
            await gateway.post(
                "/v1/tools/echo/call",
                json={"arguments": {"message": "pay 9,000"}},
                headers={**caller, **deadline_in(4.0)},
            )

        group.start_soon(call)
        await until(lambda: len(receiver.got) >= 1, 10.0)
        [held] = await pending(gateway, approver)
        await gateway.post(f"/v1/approvals/{held['id']}/deny", json={}, headers=approver)
        await anyio.sleep(1.0)  # past the first backoff: a retry would have come by now
        assert len(receiver.got) == 1


async def test_a_url_inside_the_machine_is_refused_unless_the_operator_owns_it(
    settings: Settings, tmp_path: Path
) -> None:
    for url in ("http://127.0.0.1:9/hook", "http://[::1]:9/hook", "http://10.1.2.3/hook"):
        app = create_app(with_webhook(settings, tmp_path, url))
        with pytest.raises(ConfigurationError, match=r"non-public address.*PRIVATE=true"):
            async with app.router.lifespan_context(app):
                pass
    unsigned = with_webhook(settings, tmp_path, "https://hooks.example.com/x")
    unsigned = unsigned.model_copy(update={"approval_webhook_secret": SecretStr("")})
    with pytest.raises(ConfigurationError, match="CONCLAVE_APPROVAL_WEBHOOK_SECRET"):
        create_app(unsigned)
    with pytest.raises(ConfigurationError, match="not an http"):
        create_app(with_webhook(settings, tmp_path, "ftp://hooks.example.com/x"))


def test_a_forged_altered_or_stale_notice_does_not_verify() -> None:
    body, now = b'{"event": "approval.pending"}', int(time.time())
    header = sign(SECRET.encode(), body, now)
    assert verify_signature(SECRET.encode(), header, body)
    assert not verify_signature(b"another secret", header, body)
    assert not verify_signature(SECRET.encode(), header, body + b" ")
    assert not verify_signature(SECRET.encode(), header, body, now_s=now + 3600)
    assert not verify_signature(SECRET.encode(), "t=x,v1=00", body)
