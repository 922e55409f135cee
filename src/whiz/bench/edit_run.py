"""One edit task in one mode, as `whiz bench edits` measured it: what the bench makes of a
completion and what its report reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from whiz.client import Exchange


@dataclass
class Run:
    """One task in one mode, as measured. `identical` compares with plain mode's text."""

    task_id: str
    mode: str
    text: str = ""
    completion_tokens: int | None = None
    accepted: int = 0
    rejected: int = 0
    ttft_ms: float | None = None
    total_s: float | None = None
    tokens_per_s: float | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    correct: bool = False
    identical: bool | None = None
    first_diff_at: int | None = None
    error: str | None = None

    @classmethod
    def from_turn(cls, task_id: str, mode: str, turn: Exchange) -> Run:
        usage = turn.usage
        details = usage.get("completion_tokens_details") or {}
        timings = turn.whiz
        tokens = turn.output_tokens
        if timings.get("tokens_per_s") is not None:
            speed = float(timings["tokens_per_s"])
        else:  # decode phase as the client saw it: tokens after the first over the time after it
            decode_s = (turn.total_ms - turn.client_ttft_ms) / 1000
            speed = (tokens - 1) / decode_s if tokens and tokens > 1 and decode_s > 0 else None
        return cls(
            task_id,
            mode,
            text=turn.text,
            completion_tokens=tokens,
            accepted=int(timings.get("draft_accepted", details.get("accepted_prediction_tokens")) or 0),
            rejected=int(timings.get("draft_rejected", details.get("rejected_prediction_tokens")) or 0),
            ttft_ms=turn.ttft_ms,
            total_s=turn.total_ms / 1000,
            tokens_per_s=speed,
            timings=timings,
        )
