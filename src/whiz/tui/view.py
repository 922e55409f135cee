"""The transcript: the agent's events turned into what the user reads.

Finished lines go to the scrollback (printed above the input line, where the terminal keeps
them); the line the model is still writing stays in the live area until its newline arrives.
The view also keeps what the status line shows: what the agent is doing and how fast.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text

from whiz.agent.events import Event
from whiz.agent.stats import TurnOutcome
from whiz.tui.diffs import render_diff
from whiz.tui.live import LiveStats
from whiz.tui.notices import render_notice
from whiz.tui.scrollback import Scrollback

OUTPUT_TAIL_LINES = 12
"""Lines of a command's output shown in the transcript (the model sees more)."""

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text: str) -> str:
    """Text from the model or a command, safe to print: no escape sequences (a command's colours,
    or worse, cursor moves that would wreck the screen), no control characters but newline and tab."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def clean_all(value: Any) -> Any:
    """`value` (an item: dicts, lists, strings) with every string `clean`."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: clean_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_all(v) for v in value]
    return value


class TranscriptView:
    """An `EventSink` for the agent that prints the transcript and tracks the live state."""

    def __init__(self, scrollback: Scrollback, on_change: Callable[[], None] = lambda: None):
        self.out = scrollback
        self.on_change = on_change
        self.stats = LiveStats()
        self.partial = ""
        """The model's current line, not finished yet (shown in the live area)."""
        self.activity = ""
        """What the agent does right now, in a few words ('thinking', 'running pytest')."""
        self.turn_started_at: float | None = None

    # -- the sink ------------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        item: dict[str, Any] = event.get("item") or {}
        if kind == "turn.started":
            self.turn_started_at = time.monotonic()
            self._waiting()
        elif kind == "item.started":
            self._started(item)
        elif kind == "item.updated" and item.get("type") == "agent_message":
            self._stream(event.get("delta", ""))
        elif kind == "item.completed":
            self._completed(item)
        elif kind == "error":
            self.out.print(Text(f"error: {event.get('message', '')}", style="bold red"))
        self.on_change()

    def _waiting(self) -> None:
        self.activity = "thinking"
        self.stats.waiting()

    def _started(self, item: dict[str, Any]) -> None:
        match item.get("type"):
            case "agent_message":
                self.activity = "writing"
            case "command_execution":
                self.activity = f"running {item.get('command', '')}"
            case "tool_call":
                self.activity = item.get("tool", "working").replace("_", " ")

    def _stream(self, delta: str) -> None:
        if not delta:
            return
        self.stats.text(delta)
        text = self.partial + clean(delta)
        done, _, self.partial = text.rpartition("\n")
        if _:
            self.out.print(Text(done))

    def _completed(self, item: dict[str, Any]) -> None:
        match item.get("type"):
            case "agent_message":
                if self.partial:
                    self.out.print(Text(self.partial))
                    self.partial = ""
                self.stats.finished(item.get("whiz") or {})
                self._waiting()
            case "file_change":
                self._file_change(item)
            case "command_execution":
                self._command(item)
                self._waiting()
            case "tool_call":
                args = " ".join(str(v) for v in (item.get("arguments") or {}).values() if v is not None)
                mark = "·" if item.get("status") == "completed" else "✗"
                self.out.print(Text(clean(f"{mark} {item.get('tool', '')} {args}").rstrip(), style="dim"))
                self._waiting()
            case "error":
                first = clean(item.get("message") or "").splitlines()[:1]
                self.out.print(Text(f"! the model's action was malformed: {''.join(first)}", style="yellow"))
                self._waiting()
            case "user_message":
                self.out.print(Text(f"→ delivered to the agent: {item.get('text', '')}", style="magenta"))
            case _:  # mode changes, policy decisions, healing and swarm progress
                if line := render_notice(clean_all(item)):
                    self.out.print(line)

    def _file_change(self, item: dict[str, Any]) -> None:
        paths = clean(", ".join(c.get("path", "") for c in item.get("changes", [])))
        status = item.get("status")
        if status == "completed":
            self.out.print(Text(f"✎ edited {paths}", style="bold green"))
            several = len(item.get("changes", [])) > 1
            self.out.print(render_diff(clean(item.get("diff", "")), titles=several))
        elif status == "declined":
            self.out.print(Text(f"✗ edit of {paths} not applied (read-only)", style="yellow"))
        else:
            self.out.print(Text(f"✗ edit of {paths} failed; nothing was changed", style="red"))

    def _command(self, item: dict[str, Any]) -> None:
        command, status = item.get("command", ""), item.get("status")
        if status == "declined":
            self.out.print(Text(f"✗ not run: $ {command}", style="yellow"))
            return
        exit_code = item.get("exit_code")
        style = "green" if status == "completed" else "red"
        ended = f"exit {exit_code}" if exit_code is not None else status
        self.out.print(Text(f"$ {clean(command)}  ({ended})", style=f"bold {style}"))
        lines = clean(item.get("aggregated_output") or "").rstrip("\n").splitlines()
        if len(lines) > OUTPUT_TAIL_LINES:
            hidden = len(lines) - OUTPUT_TAIL_LINES
            lines = [f"… {hidden} more line(s)"] + lines[-OUTPUT_TAIL_LINES:]
        if lines:
            self.out.print(Text("\n".join("  " + line for line in lines), style="dim"))

    # -- the end of a turn (from its result: the events do not say whether the user stopped it) ---------

    def turn_ended(self, result: TurnOutcome) -> None:
        """Print how the turn ended: its figures, that the user stopped it, or why it failed."""
        self._flush_partial()
        if result.status == "completed":
            self._turn_completed(result.stats.timings())
        elif result.status == "cancelled":
            self.out.print(Text("■ stopped", style="bold yellow"))
        else:
            self.out.print(Text(f"✗ failed: {result.message}", style="bold red"))
        self.activity = ""
        self.turn_started_at = None
        self.on_change()

    def _turn_completed(self, timings: dict[str, Any]) -> None:
        parts = [f"done in {timings.get('duration_ms', 0) / 1000:.1f} s"]
        calls = timings.get("model_calls")
        if calls:
            parts.append(f"{calls} model call{'s' if calls != 1 else ''}")
        if timings.get("ttft_ms") is not None:
            parts.append(f"ttft {timings['ttft_ms']:.0f} ms")
        if timings.get("tokens_per_s") is not None:
            parts.append(f"{timings['tokens_per_s']:.1f} tok/s")
        self.out.print(Text("── " + " · ".join(parts), style="dim"))

    def _flush_partial(self) -> None:
        if self.partial:
            self.out.print(Text(self.partial))
            self.partial = ""

    # -- what the live area shows ----------------------------------------------------------------------

    def status(self) -> str:
        """`writing 3.2 s · ttft 210 ms · ~38.0 tok/s` while a turn runs; '' otherwise."""
        if self.turn_started_at is None:
            return ""
        elapsed_s = time.monotonic() - self.turn_started_at
        speed = self.stats.describe()
        return f"{self.activity} {elapsed_s:.1f} s" + (f" · {speed}" if speed else "")
