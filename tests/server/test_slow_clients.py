"""Slow and silent clients cost nothing the others need: half-sent heads neither fill the
connection cap nor stay forever, a WebSocket that pings without reading is closed, and a body
is refused at its limit without being buffered, on every route that takes one."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import struct
import time
from pathlib import Path

import httpx
import pytest

from whiz.server.waiting import MIN_HEAD_S, WaitingConnections, WaitingLimits, _Counted

HALF_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def address(served) -> tuple[str, int]:
    host, port = served.root.removeprefix("http://").split(":")
    return host, int(port)


def half_heads(served, n: int) -> list[socket.socket]:
    held = []
    for _ in range(n):
        sock = socket.create_connection(address(served), timeout=10)
        sock.sendall(HALF_HEAD)
        held.append(sock)
    return held


def closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (what it sent before closing is read and dropped)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def everything(sock: socket.socket) -> bytes:
    """What the server sends until it closes."""
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            out += chunk
    return out


def test_half_sent_heads_do_not_fill_the_connection_cap(serve_fake):
    served = serve_fake(max_connections=8)
    held = half_heads(served, 30)  # far past the cap, from one address
    try:
        with httpx.Client(timeout=10) as other:
            for _ in range(3):
                assert other.get(f"{served.root}/health").status_code == 200
    finally:
        for sock in held:
            sock.close()


def test_one_address_holds_a_bounded_number_of_half_sent_heads(serve_fake):
    served = serve_fake(max_waiting_per_address=4)
    held = half_heads(served, 10)
    try:
        time.sleep(MIN_HEAD_S + 0.1)  # a head younger than this is spared: its bytes may be unread
        # The oldest go first: with the honest request's own, four are kept, and it gets in.
        assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200
        for sock in held[:7]:
            sock.settimeout(3)  # well before their head deadline (10 s)
            assert closed(sock)
        for sock in held[7:]:
            sock.settimeout(0.2)
            assert not closed(sock)
        assert "whiz_connections_evicted_total 7" in httpx.get(f"{served.root}/metrics").text
    finally:
        for sock in held:
            sock.close()


def test_a_head_that_never_ends_gets_a_408_and_the_close(serve_fake):
    served = serve_fake(header_timeout_s=0.5)
    with socket.create_connection(address(served), timeout=10) as sock:
        sock.sendall(HALF_HEAD)
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert closed(sock)
    assert "whiz_connections_timed_out_total 1" in httpx.get(f"{served.root}/metrics").text


def test_a_silent_connection_is_closed_too(serve_fake):
    served = serve_fake(header_timeout_s=0.5)
    with socket.create_connection(address(served), timeout=10) as sock:
        assert closed(sock)


def test_a_body_that_trickles_gets_a_408(serve_fake):
    served = serve_fake(body_timeout_s=0.5)
    with socket.create_connection(address(served), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        reply = everything(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"request_timeout" in reply


# -- a WebSocket that pings and never reads ---------------------------------------------------------


def _frame(opcode: int, payload: bytes) -> bytes:
    """A masked client frame (payload under 126 bytes)."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload)) + mask + masked


def _open_socket(served, headers: str = "") -> socket.socket:
    sock = socket.create_connection(address(served), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that reads nothing
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:  # the handshake's answer is read; nothing after it ever is
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


@pytest.mark.parametrize("keys", [[], ["secret"]], ids=["keyless", "before-the-key-check"])
def test_a_websocket_that_pings_and_never_reads_is_closed(serve_fake, keys):
    served = serve_fake(api_keys=keys)
    sock = _open_socket(served)
    ping = _frame(0x9, b"p" * 125)
    burst = ping * 512
    sent = 0
    limit = 256 * 1024 * 1024  # what the server would have had to buffer in pongs
    try:
        # The server hung up (a send that merely blocks, the server no longer reading, fails this).
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            while sent < limit:
                sock.sendall(burst)
                sent += len(burst)
    finally:
        sock.close()
    assert sent < limit
    assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200


def test_a_websocket_that_reads_gets_its_pongs(serve_fake):
    from websockets.sync.client import connect

    served = serve_fake()
    with connect(served.base_url.replace("http", "ws", 1) + "/responses") as ws:
        for _ in range(50):
            assert ws.ping().wait(timeout=10)


def test_a_websocket_that_pings_faster_than_any_keep_alive_is_closed(serve_fake):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    served = serve_fake()
    with connect(served.base_url.replace("http", "ws", 1) + "/responses") as ws:
        with pytest.raises(ConnectionClosed) as closed_by:
            # The ping that trips the limit gets no pong: a short wait, not the 10 s one above.
            for _ in range(1000):
                ws.ping().wait(timeout=1)
        assert closed_by.value.rcvd is not None and closed_by.value.rcvd.code == 1008


# -- one body reader --------------------------------------------------------------------------------


def _chunked(sock: socket.socket, path: str, total_bytes: int) -> int:
    """Send `total_bytes` of a chunked body to `path`; the bytes sent before the server hung up."""
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n".encode()
    )
    chunk = b"x" * 65536
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    sent = 0
    try:
        while sent < total_bytes:
            sock.sendall(frame)
            sent += len(chunk)
    except OSError:
        pass  # the server stopped reading and closed
    return sent


@pytest.mark.parametrize("path", ["/whiz/workspace/edit", "/v1/chat/completions", "/v1/messages"])
def test_a_huge_chunked_body_is_refused_at_the_limit(serve_fake, tmp_path: Path, monkeypatch, path):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))
    (tmp_path / "project").mkdir()
    served = serve_fake(workspace=tmp_path / "project", max_body_mb=1)
    with socket.create_connection(address(served), timeout=10) as sock:
        sent = _chunked(sock, path, 1200 * 1024 * 1024)
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    # The server read about the limit (plus what the sockets' buffers held), not the 1.2 GB.
    assert sent < 64 * 1024 * 1024
    assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200


# -- a client that stops reading ---------------------------------------------------------------------


def test_a_stream_no_one_reads_is_dropped_and_its_turn_ends(serve_fake):
    from .test_websocket import wait_for

    served = serve_fake(lambda _: "x" * 3000, send_timeout_s=0.5)
    body = b'{"messages": [{"role": "user", "content": "go"}], "max_tokens": 3000, "stream": true}'
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(address(served))
    try:
        # The server's side of the socket gets a small buffer, so a few hundred kB fill it.
        assert wait_for(lambda: len(served.uvicorn.server_state.connections) == 1, timeout_s=10)
        for conn in served.uvicorn.server_state.connections:
            conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert wait_for(lambda: served.engine.status()["active"] == 1, timeout_s=10)
        # Nothing is read: the buffers fill, and half a second later the server lets go, and the
        # turn ends before its 3000 tokens.
        assert wait_for(lambda: served.state.in_flight == 0, timeout_s=60)
        assert wait_for(lambda: served.engine.status()["active"] == 0, timeout_s=10)
        assert closed(sock)
    finally:
        sock.close()
    assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200


def test_a_connection_answered_before_its_body_arrived_serves_its_next_request(serve_fake):
    served = serve_fake(api_keys=["good"])
    body = b'{"messages": [{"role": "user", "content": "' + b"x" * 400_000 + b'"}]}'
    with httpx.Client(base_url=served.base_url, timeout=10) as client:
        # Refused on its headers, before its body is read: the body is read and dropped, and the
        # same connection then serves the next request.
        wrong = client.post("/chat/completions", content=body, headers={"Authorization": "Bearer bad"})
        assert wrong.status_code == 401
        right = client.post(
            "/chat/completions",
            json={"messages": [{"role": "user", "content": "ok"}]},
            headers={"Authorization": "Bearer good"},
        )
        assert right.status_code == 200


def _get_health(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    return reply


def test_idle_keep_alive_connections_are_never_closed_to_make_room(serve_fake):
    # A proxy in front of the server holds many idle connections from one address, and may
    # reuse any of them at any moment: half-sent heads from that address must not push them out.
    served = serve_fake(max_waiting_per_address=2)
    idle: list[socket.socket] = []
    held: list[socket.socket] = []
    try:
        for _ in range(4):
            idle.append(socket.create_connection(address(served), timeout=10))
            assert _get_health(idle[-1]).startswith(b"HTTP/1.1 200")
        held = half_heads(served, 6)
        for sock in idle:
            assert _get_health(sock).startswith(b"HTTP/1.1 200")
    finally:
        for sock in idle + held:
            sock.close()


def test_refused_websockets_that_never_answer_the_close_do_not_fill_the_cap(serve_fake):
    served = serve_fake(api_keys=["secret"], max_connections=4)
    refused = [_open_socket(served) for _ in range(8)]  # no key
    try:
        for sock in refused:
            said = b""
            while b"\x88" not in said:  # the error event, then the server's close frame
                said += sock.recv(4096)
        # None of them answers the close: they wait for it, but do no work.
        assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200
    finally:
        for sock in refused:
            sock.close()


def test_a_refused_websocket_cannot_make_the_server_read_a_large_message(serve_fake):
    served = serve_fake(api_keys=["secret"])
    sock = _open_socket(served)  # no key: refused, and the server closes
    try:
        said = b""
        while b"\x88" not in said:
            said += sock.recv(4096)
        mask = os.urandom(4)
        payload = b"x" * (8 * 1024 * 1024)
        frame = struct.pack("!BBQ", 0x81, 0x80 | 127, len(payload)) + mask + payload  # never unmasked
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            sock.sendall(frame)  # the server hangs up instead of reading 8 MB it would drop
    finally:
        sock.close()


# -- the connection cap ------------------------------------------------------------------------------


def _held_requests(served, n: int) -> list[socket.socket]:
    """`n` connections with a request under way (its head sent, its body not yet)."""
    held = []
    for _ in range(n):
        sock = socket.create_connection(address(served), timeout=10)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        held.append(sock)
    return held


@pytest.mark.parametrize(
    ("path", "shape"), [("/v1/models", "openai"), ("/v1/messages/count_tokens", "anthropic")]
)
def test_a_request_past_the_connection_cap_gets_a_json_503_with_retry_after(serve_fake, path, shape):
    served = serve_fake(max_connections=2)
    held = _held_requests(served, 2)
    try:
        time.sleep(0.3)  # both heads read: both count
        with httpx.Client(timeout=10) as other:
            busy = other.request("GET" if shape == "openai" else "POST", f"{served.root}{path}", json={})
        assert busy.status_code == 503
        assert busy.headers["retry-after"] == "1"
        assert busy.headers["connection"] == "close"
        body = busy.json()
        if shape == "anthropic":  # the only shape Anthropic's SDK reads
            assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
        else:
            assert body["error"]["code"] == "too_many_connections"
        assert "most connections (2)" in str(body)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(f"{served.root}/health", timeout=10).status_code == 200


class _Loop:
    """An event loop's clock and timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback, *args) -> _Timer:  # noqa: ANN001
        return _Timer(self.now + delay)


class _Timer:
    def __init__(self, when: float) -> None:
        self._when = when

    def when(self) -> float:
        return self._when

    def cancel(self) -> None:
        pass


class _Head:
    """A connection that sent half a head, as `WaitingConnections` sees it."""

    def __init__(self, loop: _Loop, address: str = "10.0.0.9") -> None:
        self.loop, self.address, self.dropped = loop, address, False

    def has_unread(self) -> bool:
        return False

    def drop(self) -> None:
        self.dropped = True  # its transport closes; connection_lost comes a loop pass later


def test_connections_closed_to_make_room_do_not_count_while_they_close():
    # A slowloris that reconnects hundreds of sockets at once gets them all accepted in one pass
    # of the event loop; each new head closes an old one, and those stay open until the next
    # pass. Were they counted meanwhile, an honest request whose head completed in that pass
    # found the cap full of them and got a 503 `too_many_connections` (seen in a soak).
    loop = _Loop()
    waiting = WaitingConnections(WaitingLimits(max_waiting_per_address=4))
    opened: set = set()
    counted = _Counted(opened, waiting)
    old = [_Head(loop) for _ in range(10)]
    for conn in old:
        opened.add(conn)
        waiting.wait(conn, deadline=True)
    loop.now = MIN_HEAD_S + 0.5
    burst = [_Head(loop) for _ in range(10)]
    for conn in burst:
        opened.add(conn)
        waiting.wait(conn, deadline=True)
    assert sum(conn.dropped for conn in old) == 10 and waiting.evicted == 10
    assert len(counted) == 0  # all 20 still open, none with a request under way
    for conn in old:  # their connection_lost
        opened.discard(conn)
        waiting.start(conn)
    assert len(counted) == 0 and len(waiting) == 10


def test_connections_closed_for_a_late_head_do_not_count_while_they_close():
    loop = _Loop()
    waiting = WaitingConnections(WaitingLimits(header_timeout_s=1.0))
    late = _Head(loop)
    late.time_out = lambda seconds: None  # writes the 408, closes; connection_lost comes later
    opened = {late}
    waiting.wait(late, deadline=True)
    waiting._expire(late)  # its head deadline's timer
    assert waiting.expired == 1 and len(_Counted(opened, waiting)) == 0
