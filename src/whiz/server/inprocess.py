"""A whiz server inside the current process, for tools that need one when none is running.

`whiz exec` (and the interactive agent) talk to the engine only through the client. When no
server answers at the configured URL, they start this one: the engine loads here, uvicorn
serves it on a free loopback port from a background thread, and the agent connects to it like
to any other server.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.errors import WhizError
from whiz.server.app import create_app


class InProcessServer:
    """The engine plus uvicorn on a daemon thread. `start()` returns the base URL; `stop()` ends both."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.engine = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 30.0) -> str:
        self.engine = load_engine(self.settings)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        app = create_app(self.engine, self.settings)
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="websockets-sansio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="whiz-inprocess-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise WhizError("the in-process server did not start")
            time.sleep(0.02)
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.engine is not None:
            self.engine.close()
            self.engine = None
