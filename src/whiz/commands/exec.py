"""`whiz exec` and `whiz resume`: one task in a `AgentSession`, with modes, healing steps and the policy."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from whiz.agent.events import EventSink
from whiz.commands.common import Output
from whiz.modes.pool import Models
from whiz.modes.session import AgentSession, SessionOptions


def exec_in_mode(
    task: str,
    options: SessionOptions,
    output: Output | None = None,
    *,
    pool: Models | None = None,
) -> int:
    """`whiz exec` (and `whiz resume`) with modes, healing steps (`options.heal`) and the policy;
    returns the exit code."""
    output = output or Output()
    sink = output.sink()
    return output.run(_exec(task, options, sink, output, pool), sink)


async def _exec(
    task: str,
    options: SessionOptions,
    sink: EventSink,
    output: Output,
    pool: Models | None,
) -> bool:
    session = await AgentSession.open(options, sink=sink, notice=output.notice, pool=pool)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, session.cancel)
    try:
        result = await session.run(task)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await session.close()
    if not result.ok:
        output.errors.write(f"error: {result.message}\n")
    return result.ok
