"""A program in a pseudo-terminal, seen through a terminal emulator, so tests read the screen a user sees.

pexpect runs the program in a pty; pyte interprets what it writes (cursor moves, redraws, colours)
into rows of characters, and answers the terminal queries a real terminal answers (cursor position).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pexpect
import pyte

KEYS = {"esc": "\x1b", "ctrl-c": "\x03", "ctrl-d": "\x04", "enter": "\r"}


class Terminal:
    """`Terminal(argv, cwd, env)`; `wait_for(pattern)` polls the screen (and its scrollback)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], *, rows: int = 40, cols: int = 110):
        self.screen = pyte.HistoryScreen(cols, rows, history=5000, ratio=0.5)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, dimensions=(rows, cols))
        # Answers to the program's queries (prompt_toolkit asks where the cursor is).
        self.screen.write_process_input = lambda data: self.child.send(data.encode())

    def pump(self, timeout_s: float = 0.05) -> bool:
        """Read what the program wrote so far; False once it has exited and everything was read."""
        try:
            data = self.child.read_nonblocking(65536, timeout=timeout_s)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.stream.feed(data)
        return True

    def text(self) -> str:
        """Everything on the screen and scrolled above it, one line a row, right-trimmed."""
        cols = self.screen.columns
        rows = ["".join(line[x].data for x in range(cols)) for line in self.screen.history.top]
        rows += self.screen.display
        return "\n".join(row.rstrip() for row in rows)

    def wait_for(self, pattern: str, timeout_s: float = 30.0) -> re.Match:
        """The first match of the regular expression `pattern` once it is on the screen."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        alive = True
        while True:
            found = regex.search(self.text())
            if found:
                return found
            if not alive or time.monotonic() > deadline:
                why = "the program exited" if not alive else f"not on screen after {timeout_s:g} s"
                raise AssertionError(f"{pattern!r} {why}. The screen:\n{self.text()}")
            alive = self.pump()

    def settle(self, seconds: float) -> str:
        """Keep reading for `seconds` (to see that something does NOT appear); returns the screen."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.pump():
            pass
        return self.text()

    def type(self, text: str) -> None:
        self.child.send(text.encode())

    def enter(self, line: str = "") -> None:
        """Type a line and press Enter."""
        self.child.send(line.encode())
        self.child.send(b"\r")

    def press(self, key: str) -> None:
        self.child.send(KEYS[key].encode())

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while self.pump():
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not exit. The screen:\n{self.text()}")
        self.child.wait()
        return self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
