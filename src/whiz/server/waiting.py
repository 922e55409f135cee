"""Connections that have not sent a whole request head cost nothing the others need.

uvicorn counts every open connection toward `limit_concurrency` from the moment it is accepted,
and has no deadline for a request's headers: 520 sockets that each send half a header and wait
hold the 512 places for as long as their owner likes, and every request, `/health` included,
gets a 503. Here a connection that is *waiting* (opened but its request head not complete, or
idle between two requests) is not counted, and is bounded instead:

- its request head must be complete `header_timeout_s` after the connection opened, or after the
  first byte of its next request (nginx's client_header_timeout): else a 408 and the close;
- one address keeps at most `max_waiting_per_address` of those heads, and the server
  `max_waiting`: past either, the oldest (of that address first) is closed, once it has had
  `MIN_HEAD_S` to send its head. A new connection is never the one refused, and one accepted in
  the same burst as a flood of others is not closed before its head could be read: an honest
  client always gets its turn.

Idle keep-alive connections are not counted either, and are closed by uvicorn's own
`timeout_keep_alive`.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import h11
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from whiz.server.stalls import SEND_TIMEOUT_S, StallTimer

LINGER_S = 2.0
LINGER_BYTES = 1024 * 1024
"""How long, and how much of the unread body, a connection answered early reads and drops."""
MIN_HEAD_S = 1.0
"""A head this young is never closed to make room (its bytes may simply not be read yet)."""
H11_MAX_HEAD_BYTES = 16 * 1024
"""h11's default bound on a request head, which uvicorn keeps unless told otherwise."""


def _timeout_response(seconds: float) -> bytes:
    body = f"The request's headers did not arrive within {seconds:g} s.\n".encode()
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body)
    )
    return head + body


@dataclass
class WaitingLimits:
    """Bounds on connections that have not sent a whole request head (see the module docstring)."""

    header_timeout_s: float = 10.0
    max_waiting_per_address: int = 64
    max_waiting: int = 1024
    send_timeout_s: float = SEND_TIMEOUT_S
    """Longest a client may leave an answer unread (see `stalls.py`)."""


class WaitingConnections:
    """The waiting connections of one server.

    Two kinds: *heads* (opened, or with part of their next request's head received), which have
    a deadline and are bounded per address and in all, oldest closed first; and *idle* ones
    (answered, keep-alive), which uvicorn closes after `timeout_keep_alive` and which are never
    closed to make room: a client may be reusing one at that very moment (a proxy in front of the
    server holds many from one address), and only a head lasts long enough to hoard.
    """

    def __init__(self, limits: WaitingLimits):
        self.limits = limits
        self._heads: OrderedDict[WaitingProtocol, asyncio.TimerHandle] = OrderedDict()
        """Oldest first; each one's timer is its head deadline (`TimerHandle.when()` - timeout: its start)."""
        self._idle: set[WaitingProtocol] = set()
        self._closing: set[Any] = set()
        self._by_address: dict[str, OrderedDict[WaitingProtocol, None]] = {}
        self.expired = 0
        """Connections closed with a 408 because their request head was late."""
        self.evicted = 0
        """Connections closed to make room for newer ones."""

    def __len__(self) -> int:
        return len(self._heads) + len(self._idle) + len(self._closing)

    def __contains__(self, conn: object) -> bool:
        return conn in self._heads or conn in self._idle or conn in self._closing

    def closing(self, conn: Any) -> None:
        """A WebSocket that sent its close and waits only for the client's (bounded by its close
        timeout): it does no work, so it is not counted. Refused sockets (a wrong key) end this
        way, and a flood of them must not fill the cap either."""
        self._closing.add(conn)

    def wait(self, conn: WaitingProtocol, *, deadline: bool) -> None:
        """`conn` has no request under way, so it is not counted: a head from now on when
        `deadline` (a new connection), else idle (a keep-alive connection between requests)."""
        self.start(conn)
        if deadline:
            self._head(conn)
        else:
            self._idle.add(conn)

    def arm(self, conn: WaitingProtocol) -> None:
        """A byte of an idle connection's next request came: it is a head from now on."""
        if conn in self._idle:
            self._idle.discard(conn)
            self._head(conn)

    def start(self, conn: WaitingProtocol) -> None:
        """`conn`'s request head is complete (or it is gone): it counts again, with no deadline."""
        self._idle.discard(conn)
        self._closing.discard(conn)
        timer = self._heads.pop(conn, None)
        if timer is None:
            return
        timer.cancel()
        mine = self._by_address[conn.address]
        mine.pop(conn, None)
        if not mine:
            del self._by_address[conn.address]

    def _head(self, conn: WaitingProtocol) -> None:
        self._heads[conn] = conn.loop.call_later(self.limits.header_timeout_s, self._expire, conn)
        self._by_address.setdefault(conn.address, OrderedDict())[conn] = None
        self._make_room(conn.address)

    def _expire(self, conn: WaitingProtocol) -> None:
        if conn in self._heads:
            self._let_go(conn)
            self.expired += 1
            conn.time_out(self.limits.header_timeout_s)

    def _let_go(self, conn: WaitingProtocol) -> None:
        """`conn` is being closed by the server: it no longer has a head to wait for, and is not
        counted until it is gone (its `connection_lost` comes a loop pass later). A burst of
        connections accepted in one pass closes as many old heads; counted meanwhile, they
        would fill the cap for any request whose head completed in that pass."""
        self.start(conn)
        self._closing.add(conn)

    def _make_room(self, address: str) -> None:
        mine = self._by_address.get(address)
        if mine:
            self._shrink(mine, self.limits.max_waiting_per_address)
        self._shrink(self._heads, self.limits.max_waiting)

    def _shrink(self, heads: Mapping[WaitingProtocol, object], most: int) -> None:
        """Close the oldest of `heads` past `most`, sparing the young and those whose next bytes
        are already here, unread (a busy loop has not got to them: their client is not slow)."""
        excess = len(heads) - most
        if excess <= 0:
            return
        victims = []
        for conn in heads:
            if len(victims) == excess or not self._old(conn):
                break  # oldest first: the rest are younger still
            if not conn.has_unread():
                victims.append(conn)
        for conn in victims:
            self._evict(conn)

    def _old(self, conn: WaitingProtocol) -> bool:
        started = self._heads[conn].when() - self.limits.header_timeout_s
        return conn.loop.time() - started >= MIN_HEAD_S

    def _evict(self, conn: WaitingProtocol) -> None:
        self._let_go(conn)
        self.evicted += 1
        conn.drop()


class _Counted:
    """The connection set uvicorn's `limit_concurrency` check sees: every open connection (the
    server's own set, which its shutdown walks) less the waiting ones."""

    def __init__(self, everything: set, waiting: WaitingConnections):
        self.everything = everything
        self.waiting = waiting

    def add(self, conn: Any) -> None:
        self.everything.add(conn)

    def discard(self, conn: Any) -> None:
        self.everything.discard(conn)

    def __len__(self) -> int:
        return len(self.everything) - len(self.waiting)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.everything)


class _HeadWatch(h11.Connection):
    """h11's connection, telling its protocol the moment a request head is complete: before
    uvicorn's `limit_concurrency` check, which then counts this connection."""

    def __init__(self, max_incomplete_event_size: int, on_request: Callable[[], None]):
        super().__init__(h11.SERVER, max_incomplete_event_size)
        self._on_request = on_request

    def next_event(self):  # noqa: ANN201 (h11's own union of events and sentinels)
        event = super().next_event()
        if isinstance(event, h11.Request):
            self._on_request()
        return event


class WaitingProtocol(H11Protocol):
    """uvicorn's h11 protocol with its waiting time bounded. `waiting` and `busy` are set per
    server by `waiting_protocol`.

    At `limit_concurrency` a request is answered by `busy` (whiz's JSON 503 with `Retry-After`)
    instead of uvicorn's plain-text one: the count is taken the moment the request's head is
    complete, as uvicorn takes it, and uvicorn's own check is turned off.
    """

    waiting: WaitingConnections
    busy: ASGIApp | None = None

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], _loop: Any = None):
        super().__init__(config, server_state, app_state, _loop)
        self.cap: int | None = self.limit_concurrency if self.busy is not None else None
        if self.cap is not None:
            self.limit_concurrency = None
            self.app = self._capped(self.app)
        self._over_cap = False
        self.connections = _Counted(server_state.connections, self.waiting)  # type: ignore[assignment]
        head_bytes = config.h11_max_incomplete_event_size or H11_MAX_HEAD_BYTES
        self.conn = _HeadWatch(head_bytes, self._head_complete)
        self.address = ""
        self.lingering_bytes: int | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._lingering_cycle: Any = None
        self.stall = StallTimer(self.loop, self.waiting.limits.send_timeout_s, self.drop_unread)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else ""
        self.waiting.wait(self, deadline=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.start(self)
        self.stall.resumed()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        self.stall.paused()
        super().pause_writing()

    def resume_writing(self) -> None:
        self.stall.resumed()
        super().resume_writing()

    def drop_unread(self) -> None:
        """The client has read nothing for the send timeout: end the connection (its request and
        turn end as when a client hangs up)."""
        if not self.transport.is_closing():
            self.transport.abort()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self.waiting.start(self)  # the WebSocket protocol takes the connection from here
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        if not self.transport.is_closing() and self.conn.their_state is h11.SEND_BODY:
            self._linger()
            return
        if not self.transport.is_closing():
            self.waiting.wait(self, deadline=False)  # a pipelined request counts again at once
        super().on_response_complete()

    def _linger(self) -> None:
        """Answered before the request's body was all read (a 413, a 401): the rest of the body is
        read and dropped, up to `LINGER_BYTES` and `LINGER_S` (nginx's lingering close). A body
        that ends within them leaves the connection serving the next request, as usual; one that
        does not is never read to its end: the connection is closed (closing at once, with the
        body still arriving, would reset it before the client read the answer)."""
        self.lingering_bytes = LINGER_BYTES
        self._linger_timer = self.loop.call_later(LINGER_S, self.drop)
        self._lingering_cycle = self.cycle
        super().on_response_complete()

    def _lingered(self, data: bytes) -> None:
        assert self.lingering_bytes is not None
        self.lingering_bytes -= len(data)
        if self.lingering_bytes <= 0:
            self.drop()
            return
        super().data_received(data)  # h11 reads the body's end; uvicorn drops what it holds
        ended = self.cycle is not self._lingering_cycle or self.conn.their_state is not h11.SEND_BODY
        if ended and not self.transport.is_closing():
            self.lingering_bytes = None
            if self._linger_timer is not None:
                self._linger_timer.cancel()
            if self.conn.their_state is h11.IDLE:  # no pipelined request followed: idle now
                self.waiting.wait(self, deadline=True)

    def data_received(self, data: bytes) -> None:
        if self.lingering_bytes is not None:
            self._lingered(data)
            return
        self.waiting.arm(self)
        super().data_received(data)

    def _head_complete(self) -> None:
        self.waiting.start(self)
        # This connection counts from here on; the request's own task is not made yet.
        cap = self.cap
        self._over_cap = cap is not None and (len(self.connections) >= cap or len(self.tasks) >= cap)

    def _capped(self, app: ASGIApp) -> ASGIApp:
        """`app`, or `busy` for a request that came past the cap (h11 reads no further request on
        this connection before this one is answered, so the flag is this request's)."""

        async def capped(scope: Any, receive: Any, send: Any) -> None:
            over, self._over_cap = self._over_cap, False
            if over and self.busy is not None:
                await self.busy(scope, receive, send)
            else:
                await app(scope, receive, send)

        return capped

    def time_out(self, seconds: float) -> None:
        """Answer 408 and close: the request's head took too long."""
        if not self.transport.is_closing():
            self.transport.write(_timeout_response(seconds))
            self.transport.close()

    def has_unread(self) -> bool:
        """Whether bytes wait in the socket that the event loop has not read yet."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            with socket.socket(fileno=os.dup(sock.fileno())) as peek:
                return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # nothing there (EAGAIN), or the socket is gone
            return False

    def drop(self) -> None:
        """Close without an answer: no request was made (or the last one was answered)."""
        if not self.transport.is_closing():
            self.transport.close()


def waiting_protocol(waiting: WaitingConnections, busy: ASGIApp | None = None) -> type[WaitingProtocol]:
    """The protocol class for `uvicorn.Config(http=...)`, over one server's waiting connections;
    `busy` answers requests past `limit_concurrency` (None: uvicorn's own 503)."""
    attrs = {"waiting": waiting, "busy": None if busy is None else staticmethod(busy)}
    return type("WhizHttpProtocol", (WaitingProtocol,), attrs)
