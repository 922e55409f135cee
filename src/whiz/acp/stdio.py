"""Run the ACP agent on this process's stdin and stdout.

Only the protocol may reach stdout: the editor reads every line there as JSON-RPC. So the
protocol gets its own copy of the stdout file descriptor, and descriptor 1 itself (what `print`,
a library's log line or a child process would write to) is pointed at stderr. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from acp import run_agent, stdio_streams

from whiz.acp.agent import WhizAcpAgent
from whiz.modes.pool import Models
from whiz.modes.session import SessionOptions

STDIO_LIMIT_BYTES = 50 * 1024 * 1024
"""The longest line read from the editor (a prompt can embed whole files)."""


@contextlib.contextmanager
def protocol_stdout() -> Iterator[TextIO]:
    """A file on the real stdout for the protocol, while fd 1 and `sys.stdout` go to stderr."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "w", closefd=True)
    saved = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield protocol
    finally:
        sys.stdout = saved
        protocol.close()


async def serve_stdio(options: SessionOptions, *, pool: Models | None = None) -> None:
    """Speak ACP on stdin/stdout until the editor closes stdin."""
    agent = WhizAcpAgent(options, pool=pool)
    with protocol_stdout() as out:
        real = sys.stdout
        sys.stdout = out  # the SDK opens its writer on sys.stdout
        try:
            reader, writer = await stdio_streams(limit=STDIO_LIMIT_BYTES)
        finally:
            sys.stdout = real
        try:
            await run_agent(agent, writer, reader)
        finally:
            await agent.close()


def run(options: SessionOptions, *, pool: Models | None = None, verbose: bool = False) -> int:
    """`whiz acp`: serve one editor on stdio; the exit code."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="whiz acp: %(message)s",
    )
    if sys.stdin.isatty():
        sys.stderr.write(
            "whiz acp speaks the Agent Client Protocol on stdin and stdout: start it from your "
            "editor (see docs/acp.md). Waiting for JSON-RPC; Ctrl-D ends it.\n"
        )
    try:
        asyncio.run(serve_stdio(options, pool=pool))
    except KeyboardInterrupt:
        return 130
    return 0
