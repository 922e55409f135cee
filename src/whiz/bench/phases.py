"""Where a task's seconds went, from the session's events: `whiz bench agent`'s phase columns.

`PhaseClock` is an event sink that is also told when each event came (seconds since the task
began). The phases are wall time and do not overlap, so they add up to the task's total:

    model       the agent's own model calls, by model (fast, deep): the client's wall time of each
                call (`call_ms` in its `agent_message`'s `whiz`); prefill and decode (tokens and
                the server's seconds) are parts of it, the rest is queueing and transport
    open        starting a model for a call (the deep model's first use, say)
    localize    the healing step asking where the bug is (`localize` items' `ms`), outside a round
    candidates  a healing round's candidates being written (its `candidates_ms`)
    checks      commands the agent ran (the test command), and a healing round's time that is
                neither its candidates nor a localization inside it: its candidates' test runs,
                where they did not overlap the writing
    overhead    the rest: the agent's own work (reading files, applying edits, the judge's is not
                counted) and whatever no event accounts for
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PHASES = ("open", "localize", "candidates", "checks", "overhead")


@dataclass
class Phases:
    """One task's seconds by phase (`model` by model), and the token counts of its model calls."""

    total_s: float = 0.0
    model_s: dict[str, float] = field(default_factory=dict)
    open_s: float = 0.0
    localize_s: float = 0.0
    candidates_s: float = 0.0
    checks_s: float = 0.0
    overhead_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    cached_tokens: int = 0
    decode_tokens: int = 0
    decode_s: float = 0.0

    def parts(self) -> dict[str, float]:
        """Every non-overlapping phase: `model_<label>` and PHASES; they sum to `total_s`."""
        return {f"model_{k}": v for k, v in self.model_s.items()} | {
            p: getattr(self, f"{p}_s") for p in PHASES
        }

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


class PhaseClock:
    """Reads a session's events as they come (`see`) and says where the seconds went (`phases`)."""

    def __init__(self) -> None:
        self.p = Phases()
        self._started: dict[str, float] = {}
        self._rounds: dict[str, float] = {}
        """Open healing rounds: id -> localizing seconds inside it."""

    def see(self, at_s: float, event: dict[str, Any]) -> None:
        kind, item = event.get("type"), event.get("item") or {}
        if kind == "item.started":
            self._started[item.get("id", "")] = at_s
            if item.get("type") == "heal":
                self._rounds[item.get("id", "")] = 0.0
            return
        if kind != "item.completed":
            return
        began = self._started.pop(item.get("id", ""), at_s)
        what = item.get("type")
        if what == "agent_message":
            self._call(item.get("whiz") or {})
        elif what == "command_execution":
            self.p.checks_s += at_s - began
        elif what == "localize":
            seconds = float(item.get("ms") or 0.0) / 1000
            inside = next(reversed(self._rounds), None)
            if inside is not None:
                self._rounds[inside] += seconds
            else:
                self.p.localize_s += seconds
        elif what == "heal":
            wall = at_s - began
            asked = self._rounds.pop(item.get("id", ""), 0.0)
            written = min(wall, float(item.get("candidates_ms") or 0.0) / 1000)
            self.p.candidates_s += written
            self.p.localize_s += min(asked, wall - written)
            self.p.checks_s += max(0.0, wall - written - asked)

    def _call(self, t: dict[str, Any]) -> None:
        if "call_ms" not in t:
            return  # not a routed call (no client timings): its time stays in the overhead
        label = str(t.get("model") or "model")
        self.p.model_s[label] = self.p.model_s.get(label, 0.0) + float(t["call_ms"]) / 1000
        self.p.calls[label] = self.p.calls.get(label, 0) + 1
        self.p.open_s += float(t.get("open_ms") or 0.0) / 1000
        self.p.prefill_tokens += int(t.get("prefill_tokens") or 0)
        self.p.prefill_s += float(t.get("prefill_ms") or 0.0) / 1000
        self.p.cached_tokens += int(t.get("cached_tokens") or 0)
        self.p.decode_tokens += int(t.get("decode_tokens") or 0)
        self.p.decode_s += float(t.get("decode_ms") or 0.0) / 1000

    def phases(self, total_s: float) -> Phases:
        """The phases of a task that took `total_s`: the overhead is what the others leave."""
        self.p.total_s = total_s
        counted = sum(v for k, v in self.p.parts().items() if k != "overhead")
        self.p.overhead_s = total_s - counted
        return self.p


def summed(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase over tasks (each a `Phases.as_dict()`): the median and the mean seconds and the mean
    share of a task's time; and the mean tokens and seconds of prefill and decode."""
    import statistics

    if not runs:
        return {}
    parts = [Phases(**{k: v for k, v in r.items()}).parts() for r in runs]
    out: dict[str, Any] = {}
    for name in sorted({k for p in parts for k in p}, key=order):
        values = [p.get(name, 0.0) for p in parts]
        share = [v / r["total_s"] for v, r in zip(values, runs, strict=True) if r["total_s"] > 0]
        out[name] = {
            "median_s": round(statistics.median(values), 3),
            "mean_s": round(statistics.fmean(values), 3),
            "share": round(statistics.fmean(share), 3) if share else 0.0,
        }
    for name in ("prefill_tokens", "cached_tokens", "decode_tokens", "prefill_s", "decode_s"):
        out[name] = round(statistics.fmean(r[name] for r in runs), 3)
    return out


def order(name: str) -> tuple[int, str]:
    """Models first, then the phases in PHASES' order."""
    return (-1, name) if name.startswith("model_") else (PHASES.index(name), name)


def line(phases: dict[str, Any]) -> str:
    """One task's phases in a few words: `deep 2x 21.0 s (prefill 1200 tok 4.1 s, decode 300 tok
    15.2 s), checks 1.2 s, overhead 0.4 s`."""
    p = Phases(**phases)
    said = [f"{label} {p.calls.get(label, 0)}x {s:.1f} s" for label, s in p.model_s.items()]
    if p.model_s:
        said[-1] += (
            f" (prefill {p.prefill_tokens} tok {p.prefill_s:.1f} s, {p.cached_tokens} cached;"
            f" decode {p.decode_tokens} tok {p.decode_s:.1f} s)"
        )
    said += [
        f"{name} {getattr(p, name + '_s'):.1f} s" for name in PHASES if abs(getattr(p, name + "_s")) >= 0.05
    ]
    return ", ".join(said)
