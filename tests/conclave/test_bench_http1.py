"""The gateway bench's HTTP/1.1 client reads real answers off one kept-alive connection."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from conclave.bench.core.http1 import Http1Connection, encode_request

pytestmark = pytest.mark.anyio

ANSWERS = [
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
    b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'5\r\n{"cod\r\n6\r\ne":42}\r\n0\r\n\r\n',
    b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n",  # no body, and no length to say so
]


async def test_answers_are_read_off_one_kept_alive_connection() -> None:
    connections = 0
    requests: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for answer in ANSWERS:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            requests.append(head + await reader.readexactly(length))
            writer.write(answer)
            await writer.drain()
        await reader.read()  # keep the connection open until the client closes it
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = Http1Connection(f"http://127.0.0.1:{port}")
    raw = encode_request("POST", f"http://127.0.0.1:{port}", "/x", {"Accept": "a/b"}, b"{}")
    try:
        first = await connection.request(raw)
        second = await connection.request(raw)
        with anyio.fail_after(5):  # a body read to the end of the stream would hang here
            third = await connection.request(raw)
    finally:
        await connection.aclose()
        server.close()
        await server.wait_closed()

    assert first == (200, b'{"ok":true}')
    assert second == (429, b'{"code":42}')  # a chunked body, reassembled
    assert third == (204, b"")  # answered at once, not after the server closes
    assert connections == 1  # every call on the same connection
    assert requests == [raw, raw, raw]
    assert raw.startswith(b"POST /x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nAccept: a/b\r\n" in raw and raw.endswith(b"Content-Length: 2\r\n\r\n{}")


async def test_a_kept_alive_connection_the_server_closed_is_replaced() -> None:
    connections = 0

    async def serve_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]))
        writer.write(ANSWERS[0])
        await writer.drain()
        writer.close()  # as uvicorn closes an idle kept-alive connection

    server = await asyncio.start_server(serve_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = Http1Connection(f"http://127.0.0.1:{port}")
    raw = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"
    try:
        answers = [await connection.request(raw) for _ in range(3)]
    finally:
        await connection.aclose()
        server.close()
        await server.wait_closed()

    assert answers == [(200, b'{"ok":true}')] * 3
    assert connections == 3
