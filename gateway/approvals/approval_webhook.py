"""`ApprovalWebhook`: a signed notice of each call held for approval, POSTed to an operator's URL.

The body is `{"event": "approval.pending", "approval": <ApprovalRecord>}` (the exact arguments,
the rule, the deadline: what an approver needs to decide, by the REST API or the CLI). It is
signed as `SIGNATURE_HEADER: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>` with the
operator's secret, so the receiver can tell it came from this gateway and is fresh
(`verify_signature`); `DELIVERY_HEADER` carries the approval's id, the same on every retry.

The URL is refused when it points inside the machine or a private network (as A2A push URLs
and tools' egress are: `gateway.egress.public_addresses`), at start-up and again before each
attempt, and the gateway connects to the very address it checked (a name that resolves
elsewhere the next time reaches nothing it did not check); `private` opts out, for a receiver
the operator runs on this host or its own network. A notice is sent in the background
(`run`, in the gateway's task group): a held call never waits on the receiver. An attempt that
fails (no connection, a 5xx, a 429) is retried after 0.5 s, 1 s, 2 s ... up to `ATTEMPTS` in
all and never past the approval's expiry; a receiver's 4xx is final. Past `QUEUED` notices
waiting, new ones are dropped and logged: a receiver that is down must not grow the gateway.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from gateway.egress import EgressRefused, public_addresses
from protocol import ApprovalRecord

log = logging.getLogger("conclave.gateway.approvals")

SIGNATURE_HEADER = "X-Conclave-Signature"
DELIVERY_HEADER = "X-Conclave-Delivery"
EVENT = "approval.pending"
ATTEMPTS = 6
FIRST_BACKOFF_S = 0.5
ATTEMPT_TIMEOUT_S = 5.0
QUEUED = 256  # notices waiting to be sent, at most
SENDING = 8  # notices sent at once, at most
TOLERANCE_S = 300  # `verify_signature`: how old a signature may be


class WebhookRefused(ValueError):
    """The webhook's URL or secret cannot be used; the message says why and the fix."""


def sign(secret: bytes, body: bytes, at_s: int) -> str:
    """The value of `SIGNATURE_HEADER` for `body` sent at `at_s` (unix seconds)."""
    digest = hmac.new(secret, f"{at_s}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at_s},v1={digest}"


def verify_signature(
    secret: bytes, header: str, body: bytes, *, now_s: float | None = None
) -> bool:
    """Whether `header` (the `SIGNATURE_HEADER` received) signs `body` with `secret`, made
    within `TOLERANCE_S` of now: what a receiver checks before it trusts a notice."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not fields.get("t", "").isdigit() or "v1" not in fields:
        return False
    at_s = int(fields["t"])
    if abs((time.time() if now_s is None else now_s) - at_s) > TOLERANCE_S:
        return False
    return hmac.compare_digest(sign(secret, body, at_s), f"t={at_s},v1={fields['v1']}")


class ApprovalWebhook:
    def __init__(self, url: str, secret: bytes, *, private: bool = False) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WebhookRefused(f"approval webhook {url[:128]!r} is not an http(s) URL")
        if not secret:
            raise WebhookRefused(
                "an approval webhook needs a secret to sign its notices with: set"
                " CONCLAVE_APPROVAL_WEBHOOK_SECRET (a long random value the receiver knows)"
            )
        self.url, self.secret, self.private = url, secret, private
        self._parts = parts
        # Where `notify` puts notices for `run`, once it runs (before: none is held yet).
        self._send: MemoryObjectSendStream[ApprovalRecord] | None = None

    async def check(self) -> None:
        """WebhookRefused when the URL reaches a non-public address (unless `private`)."""
        await self._address()

    def notify(self, record: ApprovalRecord) -> None:
        """Send `record`'s notice in the background (dropped, and logged, past `QUEUED`)."""
        if self._send is None:
            log.warning("approval webhook: not running; %s not sent", record.id)
            return
        try:
            self._send.send_nowait(record)
        except anyio.WouldBlock:
            log.warning("approval webhook: %s notices waiting; %s not sent", QUEUED, record.id)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Send the notices as they come, `SENDING` at once, until cancelled."""
        limit = anyio.Semaphore(SENDING)
        send, queue = anyio.create_memory_object_stream[ApprovalRecord](QUEUED)
        async with (
            send,
            queue,
            httpx.AsyncClient(timeout=ATTEMPT_TIMEOUT_S) as client,
            anyio.create_task_group() as sending,
        ):
            self._send = send
            task_status.started()
            try:
                async for record in queue:
                    await limit.acquire()
                    sending.start_soon(self._deliver_then_release, client, record, limit)
            finally:
                self._send = None

    async def _deliver_then_release(
        self, client: httpx.AsyncClient, record: ApprovalRecord, limit: anyio.Semaphore
    ) -> None:
        try:
            await self.deliver(client, record)
        finally:
            limit.release()

    async def deliver(self, client: httpx.AsyncClient, record: ApprovalRecord) -> bool:
        """Send `record`'s notice, retrying with backoff; whether the receiver took it."""
        body = json.dumps({"event": EVENT, "approval": record.model_dump(mode="json")}).encode()
        backoff = FIRST_BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            why = await self._attempt(client, record, body)
            if why is None:
                return True
            final = why.startswith("refused") or attempt == ATTEMPTS
            if final or time.time() + backoff > record.expires_at_ms / 1000:
                log.warning("approval webhook: notice of %s not delivered: %s", record.id, why)
                return False
            await anyio.sleep(backoff)
            backoff *= 2
        return False

    async def _attempt(
        self, client: httpx.AsyncClient, record: ApprovalRecord, body: bytes
    ) -> str | None:
        """None once the receiver took the notice (2xx); else why not, "refused ..." when
        trying again cannot help."""
        try:
            url, host = await self._address()
        except WebhookRefused as exc:
            return f"refused: {exc}"
        headers = {
            "Content-Type": "application/json",
            "Host": host,
            SIGNATURE_HEADER: sign(self.secret, body, int(time.time())),
            DELIVERY_HEADER: record.id,
        }
        extensions = {"sni_hostname": self._parts.hostname} if url != self.url else {}
        try:
            answer = await client.post(url, content=body, headers=headers, extensions=extensions)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if answer.is_success:
            return None
        if answer.status_code == 429 or answer.status_code >= 500:
            return f"the receiver answered {answer.status_code}"
        return f"refused by the receiver: {answer.status_code}"

    async def _address(self) -> tuple[str, str]:
        """The URL to connect to (the checked address in place of a name) and the Host."""
        parts = self._parts
        host = parts.netloc.rpartition("@")[2]
        if self.private:
            return self.url, host
        hostname = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        bracketed = f"[{hostname}]" if ":" in hostname else hostname
        try:
            [address, *_] = await public_addresses(f"{bracketed}:{port}")
        except EgressRefused as exc:
            raise WebhookRefused(
                f"approval webhook {self.url[:128]!r} is refused: {exc} (it must reach a public"
                " address; for a receiver on this host or a private network, set"
                " CONCLAVE_APPROVAL_WEBHOOK_PRIVATE=true)"
            ) from exc
        at = f"[{address}]" if address.version == 6 else str(address)
        return urlunsplit(parts._replace(netloc=f"{at}:{port}")), host
