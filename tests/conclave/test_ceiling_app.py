"""The gateway bench's ceiling row measures what it says: a bare endpoint in its own process
that parses the JSON body, makes one Redis call and answers."""

from __future__ import annotations

import httpx
import redis

from conclave.bench.overhead.ceiling_app import ceiling_server


def test_the_ceiling_endpoint_answers_and_makes_one_redis_call(redis_url: str) -> None:
    store = redis.Redis.from_url(redis_url)
    store.delete("conclave:bench:ceiling")
    with ceiling_server(redis_url) as url:
        calls = int(store.get("conclave:bench:ceiling") or 0)  # the start-up probes
        answer = httpx.post(f"{url}/echo", json={"arguments": {"message": "ping"}})
        assert answer.json() == {"result": {"message": "ping"}}
        assert int(store.get("conclave:bench:ceiling") or 0) == calls + 1
    store.close()
