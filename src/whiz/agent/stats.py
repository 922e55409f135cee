"""What a turn cost and how well the model's actions were formed: for `turn.completed` and the bench."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from whiz.agent.models.seam import Finished
from whiz.agent.tools import Action, ApplyEdits, Malformed, Outcome


@dataclass
class TurnStats:
    """Totals over a turn's model calls (from the server's usage and timings) and actions."""

    model_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    first_ttft_ms: float | None = None
    prefill_tokens: int = 0
    prefill_ms: float = 0.0
    decode_tokens: int = 0
    decode_ms: float = 0.0
    draft_accepted: int = 0
    draft_rejected: int = 0
    actions: int = 0
    malformed_actions: int = 0
    edit_attempts: int = 0
    """Edits the model tried: well-formed or not (a block that doesn't parse or match counts)."""
    edits_applied: int = 0
    acting_replies: int = 0
    """Replies that asked for at least one action, every one of them well-formed."""
    calls_started: int = 0
    """Tool calls the model began (the `tools` format): the ones the server read as calls, and
    call-shaped text it could not read."""
    calls_well_formed: int = 0
    """Of those, calls naming a known tool with arguments that fit it."""
    duration_ms: float = 0.0
    heal_tokens: int = 0
    """Of `output_tokens`, a healing step's candidates' (`heal_step.answer`)."""

    @property
    def budgeted_tokens(self) -> int:
        """The output tokens the turn's budget counts: the model's own replies. A healing step's
        candidates are bounded by the heal's time budget and counts; counted here too, a heal
        that spent many would end the turn as a runaway after it, in place of the heal's own
        word of what passed or came closest."""
        return self.output_tokens - self.heal_tokens

    def add_call(self, finished: Finished) -> None:
        self.model_calls += 1
        usage, t = finished.usage, finished.timings
        self.input_tokens += usage.get("input_tokens") or 0
        self.cached_input_tokens += (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        self.output_tokens += usage.get("output_tokens") or 0
        self.heal_tokens += t.get("heal_tokens") or 0
        if self.first_ttft_ms is None and t.get("ttft_ms") is not None:
            self.first_ttft_ms = float(t["ttft_ms"])
        self.prefill_tokens += t.get("prefill_tokens") or 0
        self.prefill_ms += t.get("prefill_ms") or 0.0
        self.decode_tokens += t.get("decode_tokens") or 0
        self.decode_ms += t.get("decode_ms") or 0.0
        self.draft_accepted += t.get("draft_accepted") or 0
        self.draft_rejected += t.get("draft_rejected") or 0

    def count(self, action: Action, outcome: Outcome) -> None:
        self.actions += 1
        self.malformed_actions += outcome.malformed
        is_edit = isinstance(action, ApplyEdits) or (isinstance(action, Malformed) and action.is_edit)
        if is_edit:
            self.edit_attempts += 1
            self.edits_applied += bool(outcome.changed)

    @property
    def tokens_per_s(self) -> float | None:
        return self.decode_tokens / self.decode_ms * 1000 if self.decode_ms > 0 else None

    def usage(self) -> dict[str, Any]:
        """Codex's usage object."""
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
        }

    def timings(self) -> dict[str, Any]:
        tps = self.tokens_per_s
        return {
            "duration_ms": round(self.duration_ms, 1),
            "model_calls": self.model_calls,
            "ttft_ms": None if self.first_ttft_ms is None else round(self.first_ttft_ms, 1),
            "prefill_tokens": self.prefill_tokens,
            "prefill_ms": round(self.prefill_ms, 1),
            "decode_tokens": self.decode_tokens,
            "decode_ms": round(self.decode_ms, 1),
            "tokens_per_s": None if tps is None else round(tps, 1),
            "draft_accepted": self.draft_accepted,
            "draft_rejected": self.draft_rejected,
        }


@dataclass
class TurnOutcome:
    """How a turn ended: `message` is the summary when completed, else the reason."""

    turn_id: str
    status: Literal["completed", "failed", "cancelled"]
    message: str
    stats: TurnStats
    changed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "completed"
