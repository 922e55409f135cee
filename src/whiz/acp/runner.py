"""The thread the agents run on. The protocol's event loop stays free to answer the editor while a
turn runs, and the agent's file reads, which are synchronous, can wait for the editor's answer to
an `fs/read_text_file` (`files.py`): that answer arrives on the protocol's loop, not the agent's."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AgentRunner:
    """An event loop on its own thread; `call` runs a coroutine there and awaits it from another loop."""

    def __init__(self, name: str = "whiz-acp-agent"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the agents' loop; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(self.submit(coro))

    def soon(self, fn: Callable[[], Any]) -> None:
        """Call `fn` on the agents' loop (thread-safe), e.g. an agent's `cancel`."""
        self.loop.call_soon_threadsafe(fn)

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs there, then stop the loop and its thread."""

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_closed():
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.submit(_cancel_all()).result(timeout_s)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.loop.close()


def on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule `coro` on `loop` (another thread's) and return its future."""
    return asyncio.run_coroutine_threadsafe(coro, loop)
