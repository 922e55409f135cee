"""`whiz exec` and `whiz resume`: one task in a `AgentSession`, with modes, healing steps and the policy."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TextIO

from whiz.agent.events import EventSink
from whiz.commands.common import notices_to, printer, run_to_exit_code
from whiz.modes.pool import Models
from whiz.modes.session import AgentSession, SessionOptions


def exec_in_mode(
    task: str,
    options: SessionOptions,
    *,
    json_mode: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    pool: Models | None = None,
) -> int:
    """`whiz exec` (and `whiz resume`) with modes, healing steps (`options.heal`) and the policy;
    returns the exit code."""
    err = err or sys.stderr
    sink = printer(json_mode, out, err)
    return run_to_exit_code(_exec(task, options, sink, err, pool), sink, err, json_mode)


async def _exec(
    task: str,
    options: SessionOptions,
    sink: EventSink,
    err: TextIO,
    pool: Models | None,
) -> bool:
    session = await AgentSession.open(options, sink=sink, notice=notices_to(err), pool=pool)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, session.agent.cancel)
    try:
        result = await session.run(task)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await session.close()
    if not result.ok:
        err.write(f"error: {result.message}\n")
    return result.ok
