"""`whiz acp`: the agent inside an editor, over the Agent Client Protocol on stdio."""

from __future__ import annotations

import sys

from whiz.commands.common import EXIT_SETUP
from whiz.modes.pool import Models
from whiz.modes.session import SessionOptions


def run_acp(options: SessionOptions, *, pool: Models | None = None, verbose: bool = False) -> int:
    """Serve the editor that started this process until it closes stdin; the exit code."""
    try:
        from whiz.acp.stdio import run
    except ImportError as exc:  # the SDK is the `acp` extra
        sys.stderr.write(
            f"error: whiz acp needs the Agent Client Protocol SDK ({exc.name or exc}): "
            "pip install 'whiz[acp]'\n"
        )
        return EXIT_SETUP
    return run(options, pool=pool, verbose=verbose)
