"""The workspace's files through the editor (`FileAccess` over ACP's `fs/read_text_file` and
`fs/write_text_file`), where the editor offers them: the agent then reads the text the user sees,
unsaved edits included, and its edits land in the editor's buffers (which the editor shows and
saves) rather than behind its back on the disk.

The agent's file reads are synchronous and run on the agent's thread (`runner.py`); each one here
waits for the editor's answer, which the protocol's loop receives on the other thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from pathlib import Path
from typing import Any

from acp import RequestError

from whiz.acp.runner import on_loop

log = logging.getLogger("whiz.acp")

FS_TIMEOUT_S = 30.0
"""How long one read or write waits for the editor."""


class ClientFiles:
    """`FileAccess` through the ACP client `conn` for one session; `read`/`write` say which of the
    two methods the client advertised (the disk serves the other)."""

    def __init__(
        self,
        conn: Any,
        session_id: str,
        loop: asyncio.AbstractEventLoop,
        *,
        read: bool,
        write: bool,
        timeout_s: float = FS_TIMEOUT_S,
    ):
        self.conn = conn
        self.session_id = session_id
        self.loop = loop
        self.read = read
        self.write = write
        self.timeout_s = timeout_s
        self.reads = 0
        self.writes = 0
        self._protocol_thread = threading.get_ident()
        """Made on the protocol's thread: waiting there for an answer that the same loop must
        receive would never end, so a call from there goes to the disk."""

    def _on_protocol_thread(self) -> bool:
        return threading.get_ident() == self._protocol_thread

    def read_text(self, path: Path) -> str | None:
        if not self.read or self._on_protocol_thread():
            return None
        future = on_loop(self.loop, self.conn.read_text_file(session_id=self.session_id, path=str(path)))
        try:
            response = future.result(self.timeout_s)
        except (RequestError, ConnectionError, concurrent.futures.TimeoutError) as exc:
            future.cancel()
            log.warning("the editor did not give %s (%s); reading it from the disk", path, exc)
            return None
        self.reads += 1
        return response.content

    def write_text(self, path: Path, text: str) -> bool:
        if not self.write or self._on_protocol_thread():
            return False
        future = on_loop(
            self.loop, self.conn.write_text_file(session_id=self.session_id, path=str(path), content=text)
        )
        try:
            future.result(self.timeout_s)
        except RequestError as exc:
            raise OSError(f"the editor refused to write it: {exc}") from None
        except ConnectionError:
            raise OSError("the editor went away") from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise OSError(f"the editor did not answer within {self.timeout_s:g} s") from None
        self.writes += 1
        return True
