"""The console against a stranger and a thief (issue 26): it sent no Content-Security-Policy,
nosniff or frame-ancestors, let anyone guess admin keys at full speed, logged out with a GET
(a link any page could fire) and a copied session cookie still worked after the logout.
Against a real stack (uvicorn in its own process); the guesser calls from its own loopback
address, the admin and the victim tenant from theirs, and keep being served."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings

GUESSER, ADMIN = "127.0.0.3", "127.0.0.2"
FAILURES = 5


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="inprocess")
    with EmbeddedStack(settings) as running:
        yield running


def _client(stack: EmbeddedStack, source: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=stack.url, transport=transport, timeout=10)


def _log_in(http: httpx.Client, key: str) -> httpx.Response:
    return http.post("/console/login", data={"admin_key": key})


def _admin_key(stack: EmbeddedStack) -> str:
    return stack.settings.admin_key.get_secret_value()


def _victim_echo(http: httpx.Client, stack: EmbeddedStack) -> None:
    token = stack.token("victim", f"a{uuid.uuid4().hex[:10]}", ["tool:echo"])
    ok = http.post(
        "/v1/tools/echo/call",
        json={"arguments": {"message": "v"}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert ok.status_code == 200 and ok.json()["result"] == "v", ok.text


def test_every_console_answer_carries_the_security_headers(stack: EmbeddedStack) -> None:
    with _client(stack, ADMIN) as http:
        answers = [
            http.get("/console/login"),  # the form
            http.get("/console/feed"),  # a redirect to it
            http.get("/console/feed/events"),  # a SERF refusal
            _log_in(http, "not the key"),  # a refused login
        ]
        session = _log_in(http, _admin_key(stack))
        answers += [session, http.get("/console/agents"), http.get("/console/chains")]
    assert [a.status_code for a in answers] == [200, 303, 403, 401, 303, 200, 200]
    for answer in answers:
        policy = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
        assert "script-src 'sha256-" in policy and "unsafe-inline" not in policy.split(";")[1]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"


def test_wrong_admin_keys_are_throttled_per_address(stack: EmbeddedStack) -> None:
    with _client(stack, GUESSER) as guesser, _client(stack, ADMIN) as admin:
        for attempt in range(FAILURES):
            wrong = _log_in(guesser, f"guess-{attempt}")
            assert wrong.status_code == 401, wrong.text
        for key in ("guess-again", _admin_key(stack)):  # the right key too: no oracle
            refused = _log_in(guesser, key)
            assert refused.status_code == 429, refused.text
            envelope = refused.json()
            assert envelope["code"] == "RATE_LIMITED"
            assert 0 < envelope["retry_after_ms"] <= 60_000
            assert "session" not in str(refused.cookies)
        # The admin's own address is not the guesser's: logged in, and tenants are served.
        assert _log_in(admin, _admin_key(stack)).status_code == 303
        assert admin.get("/console/agents").status_code == 200
        _victim_echo(admin, stack)


def test_logout_is_a_post_and_ends_the_session_on_the_server(stack: EmbeddedStack) -> None:
    with _client(stack, ADMIN) as http:
        assert _log_in(http, _admin_key(stack)).status_code == 303
        copied = http.cookies["conclave_console"]  # what a thief took before the logout
        with _client(stack, "127.0.0.4") as thief:
            thief.cookies.set("conclave_console", copied, path="/console")
            assert thief.get("/console/agents").status_code == 200

            by_get = http.get("/console/logout")
            assert by_get.status_code == 405 and by_get.json()["code"] == "METHOD_NOT_ALLOWED"
            assert http.get("/console/agents").status_code == 200  # a GET did not log out

            out = http.post("/console/logout")
            assert (out.status_code, out.headers["location"]) == (303, "/console/login")
            assert http.get("/console/agents").status_code == 303
            stolen = thief.get("/console/agents")
            assert (stolen.status_code, stolen.headers["location"]) == (303, "/console/login")
