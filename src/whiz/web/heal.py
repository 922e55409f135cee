"""Healing from the web app: N candidate edits from this server's own model, each tested with the
server's `--test-cmd` in its own copy of the workspace, all shown side by side.

Routes (under /whiz/workspace; the same key and browser checks as `workspace.py`):

    POST /heal          {task, n?, temperature?, max_tokens?, rounds?, seed?, all_candidates?, model?}
                        -> 202 {heal}
                        409 heal_running while another heal runs, 409 no_test_command without
                        --test-cmd, 400 for a bad body or an n this server cannot decode at once
    POST /heal/cancel   -> {heal}, once the heal has stopped; 409 no_heal_running
    GET  /candidates    {heal: the latest heal or null, candidates: [candidate, ...]}

A heal is `whiz.modes.healing.Healer`, as `whiz heal` runs it, with two differences: the model is
this server's own chat service (no HTTP hop; the N candidates decode as N sequences sharing the
prompt's KV cache), and nothing is applied. Each candidate with an edit is offered to the
`WorkspaceService` instead, so the user accepts it with `POST /accept {id}`, like any proposed
edit, and undoes it with `POST /undo`.

The heal runs as a task on the server's event loop, one at a time: the model decodes in the
engine's thread, the tests in subprocesses, the copies in worker threads, so the server keeps
answering. Cancelling it stops the decoding within a step and kills the test runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from whiz.agent.events import Emitter, Event
from whiz.client import ResponseError
from whiz.environments.local import truncate
from whiz.errors import Conflict, InvalidRequest, WhizError
from whiz.modes.candidates import CandidateSource, ChatCandidates
from whiz.modes.heal_results import HealOutcome
from whiz.modes.healing import Healer, HealSettings, heal_messages
from whiz.modes.pool import Label
from whiz.server.chat import ChatService
from whiz.server.protocol import ChatRequest, parse
from whiz.web.workspace import Empty, PendingEdit, WorkspaceService, json_body

if TYPE_CHECKING:
    from whiz.server.state import ServerState

log = logging.getLogger("whiz.server")

MAX_HEAL_N = HealSettings.MAX_N
"""Most candidates one heal may ask for (fewer where the engine decodes fewer at once)."""
DEFAULT_HEAL_N = 5
BASELINE_OUTPUT_CHARS = 4000
REPLY_CHARS = 4000
"""How much of a candidate's reply the page gets (to see why it holds no usable edit)."""

Status = Literal["running", "completed", "failed", "cancelled"]


class HealBody(BaseModel):
    """`POST /heal`: the task, and how to heal (defaults as `whiz heal`)."""

    # Strict: "n": "3" or true is a mistake to report, not a number to guess.
    model_config = ConfigDict(extra="forbid", strict=True)
    task: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8000)]
    n: int | None = Field(default=None, ge=1, le=MAX_HEAL_N)
    """Candidates per round; by default 5, or fewer where the engine decodes fewer at once."""
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=1024, ge=16, le=8192)
    rounds: int = Field(default=2, ge=1, le=3)
    """Rounds: the first, then one per best failure fed back, until a candidate passes."""
    seed: int | None = Field(default=1234, ge=0)
    """Candidate i samples with seed + i, so a heal can be repeated; null for fresh randomness."""
    all_candidates: bool = False
    """Every candidate finishes and the smallest passing diff wins; by default the first
    candidate to pass ends the round (`whiz heal --all`)."""
    model: str | None = Field(default=None, max_length=500)


@dataclass
class HealJob:
    """One heal: what was asked, where it is, and what it found so far."""

    id: str
    body: HealBody
    n: int
    test_cmd: str
    status: Status = "running"
    phase: str = "starting"
    """What it is doing now, for people ("round 1: testing 5 candidates in copies")."""
    started_at: float = field(default_factory=time.time)
    duration_ms: float | None = None
    error: str | None = None
    baseline: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    """The `heal_candidate` items, as each round reports them."""
    winner: tuple[int, int] | None = None
    """(round, index) of the chosen candidate: it passes, with the smallest diff, then fewest tokens."""
    replies: dict[tuple[int, int], str] = field(default_factory=dict)
    """Each candidate's reply text, once the heal is over."""
    task: asyncio.Task | None = None
    _round: int = 0

    def candidate_id(self, round_: int, index: int) -> str:
        return f"{self.id}_r{round_}c{index}"

    def observe(self, event: Event) -> None:
        """The healer's events (an `EventSink`): rounds, candidates and progress."""
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "heal" and event["type"] == "item.started":
            self._round = item["round"]
            self.phase = f"round {self._round}: the model writes {self.n} candidates"
        elif kind == "heal" and event["type"] == "item.completed":
            keys = ("round", "method", "decode_ms", "passed", "best")
            self.rounds.append({k: item.get(k) for k in keys})
        elif kind == "heal_candidate":
            self.items.append({k: v for k, v in item.items() if k not in ("id", "type")})
            done = sum(c["round"] == self._round for c in self.items)
            self.phase = (
                f"round {self._round}: {done} of {self.n} candidates done, each tested in its own copy"
            )

    def to_dict(self) -> dict[str, Any]:
        winner = None if self.winner is None else self.candidate_id(*self.winner)
        return {
            "id": self.id,
            "task": self.body.task,
            "n": self.n,
            "temperature": self.body.temperature,
            "test_cmd": self.test_cmd,
            "status": self.status,
            "phase": self.phase,
            "started_at": self.started_at,
            "duration_ms": None if self.duration_ms is None else round(self.duration_ms, 1),
            "error": self.error,
            "baseline": self.baseline,
            "rounds": self.rounds,
            "winner": winner,
        }


class ServerChat:
    """A `ChatPoster` over this server's own chat service: the request is validated and decoded
    as if it had come over HTTP, without the HTTP. Errors come back as a client would see them;
    closing the stream early cancels what is still being decoded, as a closed connection does."""

    def __init__(self, chat: ChatService, on_finished: Callable[[dict], None] = lambda response: None):
        self.chat = chat
        self.on_finished = on_finished

    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        if path != "/chat/completions":
            raise ValueError(f"ServerChat serves /chat/completions only, not {path}")
        try:
            req = parse(ChatRequest, {**body, "stream": True})
            turns = await self.chat.open(req)
        except WhizError as exc:
            raise ResponseError.from_error(exc.to_dict(), exc.status) from exc
        async for chunk in self.chat.stream(req, turns):
            if "usage" in chunk:  # the last chunk: what the metrics count
                self.on_finished(chunk)
            yield chunk


@dataclass
class OneModel:
    """What the web app's heal heals with: this server's model, the only one (nothing to escalate to)."""

    source: CandidateSource
    current: Label = "fast"

    async def candidates(self, label: Label | None = None) -> CandidateSource:
        return self.source

    def escalate(self, reason: str, trigger: str) -> bool:
        return False


class HealService:
    """Runs heals on one workspace, one at a time, and keeps the latest one's candidates."""

    def __init__(
        self,
        workspace: WorkspaceService,
        source: Callable[[str | None], CandidateSource],
        *,
        max_n: int = MAX_HEAL_N,
    ):
        self.workspace = workspace
        self.source = source
        """The candidate source for a model name (None: the server's default model)."""
        self.max_n = max(1, min(max_n, MAX_HEAL_N))
        self.job: HealJob | None = None

    @property
    def running(self) -> bool:
        return self.job is not None and self.job.status == "running"

    def start(self, body: HealBody) -> HealJob:
        """Check the request and start the heal; raises (changing nothing) when it cannot run."""
        test_cmd = self.workspace.require_test_cmd()
        n = body.n if body.n is not None else min(DEFAULT_HEAL_N, self.max_n)
        if n > self.max_n:
            raise InvalidRequest(
                f"n is {n}, but this server decodes at most {self.max_n} candidates at once (its --slots).",
                param="n",
            )
        if self.running:
            raise Conflict("A heal is already running; wait for it or cancel it first.", code="heal_running")
        job = HealJob("heal_" + uuid.uuid4().hex[:12], body, n, test_cmd)
        self.workspace.offer([])  # the last heal's candidates are gone from view: no accepting them
        self.job = job
        job.task = asyncio.create_task(self._run(job), name=f"whiz-{job.id}")
        return job

    async def cancel(self) -> HealJob:
        """Stop the running heal and wait until its test runs are killed and its copies removed."""
        job = self.job
        if job is None or job.status != "running" or job.task is None:
            raise Conflict("No heal is running.", code="no_heal_running")
        job.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job.task
        return job

    async def close(self) -> None:
        """Cancel a running heal (the server is stopping)."""
        if self.running:
            await self.cancel()

    def candidates(self) -> list[dict[str, Any]]:
        """Every candidate of the latest heal, with its edit's id and state once it is offered."""
        job = self.job
        if job is None:
            return []
        out = []
        for item in job.items:
            cid = job.candidate_id(item["round"], item["index"])
            edit = self.workspace.offered.get(cid)
            out.append(
                {
                    **item,
                    "id": cid,
                    "chosen": job.winner == (item["round"], item["index"]),
                    "reply": job.replies.get((item["round"], item["index"])),
                    "edit": None if edit is None else {"id": edit.id, "state": edit.state},
                }
            )
        return out

    async def _run(self, job: HealJob) -> None:
        started = time.perf_counter()
        try:
            outcome = await self._heal(job)
            self._offer(job, outcome)
            job.status = "completed"
            job.phase = self._verdict(job, outcome)
        except asyncio.CancelledError:
            job.status, job.phase = "cancelled", "cancelled; nothing was changed"
            raise
        except WhizError as exc:
            job.status, job.error = "failed", exc.message
            job.phase = "failed; nothing was changed"
        except Exception as exc:  # a bug here must not take the server down
            log.exception("heal %s failed", job.id)
            job.status, job.error = "failed", f"the heal failed: {exc}"
            job.phase = "failed; nothing was changed"
        finally:
            job.duration_ms = (time.perf_counter() - started) * 1000

    async def _heal(self, job: HealJob) -> HealOutcome:
        body = job.body
        ws = self.workspace.workspace
        job.phase = f"running `{job.test_cmd}` to see what fails now"
        baseline = await self.workspace.test(wait=True)
        job.baseline = {
            "exit_code": baseline.exit_code,
            "timed_out": baseline.timed_out,
            "output": truncate(baseline.output, BASELINE_OUTPUT_CHARS),
        }
        # Reads the files the task and the test output name: a worker thread, not the event loop.
        messages = await asyncio.to_thread(heal_messages, ws, body.task, job.test_cmd, baseline)
        settings = HealSettings(
            n=job.n,
            temperature=body.temperature,
            max_tokens=body.max_tokens,
            test_timeout_s=self.workspace.environment.timeout_s,
            rounds=body.rounds,
            seed=body.seed,
            first_pass=not body.all_candidates,
        )
        emit = Emitter(job.observe)
        return await Healer(ws, job.test_cmd, settings, emit=emit).heal(
            OneModel(self.source(body.model)), messages, body.task
        )

    def _offer(self, job: HealJob, outcome: HealOutcome) -> None:
        if outcome.best is not None:
            job.winner = (outcome.best.round, outcome.best.index)
        job.replies = {(r.round, r.index): truncate(r.text, REPLY_CHARS) for r in outcome.results}
        self.workspace.offer(
            [
                PendingEdit(job.candidate_id(r.round, r.index), r.changes[0].path, job.body.task, r.changes)
                for r in outcome.results
                if r.changes
            ]
        )

    @staticmethod
    def _verdict(job: HealJob, outcome: HealOutcome) -> str:
        count = len(outcome.results)
        rounds = f"{len(outcome.rounds)} round{'s' if len(outcome.rounds) != 1 else ''}"
        if outcome.best is None:
            return f"no candidate passed `{job.test_cmd}` ({count} tried in {rounds}); nothing was changed"
        passed = sum(r.passed for r in outcome.results)
        return (
            f"{passed} of {count} candidates pass `{job.test_cmd}` ({rounds}); "
            f"round {outcome.best.round}, candidate {outcome.best.index} is chosen. Accept it to apply it."
        )


def heal_routes(state: ServerState, heal: HealService) -> list[BaseRoute]:
    """The routes of the module docstring, over `heal`."""

    async def start(request: Request) -> Response:
        body = await json_body(state, request, HealBody)
        job = heal.start(body)
        return JSONResponse({"heal": job.to_dict()}, status_code=202)

    async def cancel(request: Request) -> Response:
        await json_body(state, request, Empty)
        job = await heal.cancel()
        return JSONResponse({"heal": job.to_dict()})

    async def candidates(request: Request) -> Response:
        job = heal.job
        return JSONResponse({"heal": None if job is None else job.to_dict(), "candidates": heal.candidates()})

    base = "/whiz/workspace"
    return [
        Route(f"{base}/heal", start, methods=["POST"]),
        Route(f"{base}/heal/cancel", cancel, methods=["POST"]),
        Route(f"{base}/candidates", candidates, methods=["GET"]),
    ]


def build_heal(state: ServerState, workspace: WorkspaceService) -> HealService:
    """Heals on this server's own model: candidates from its chat service, in-process."""
    chat = ServerChat(state.chat, on_finished=state.metrics.finished)
    return HealService(
        workspace,
        lambda model: ChatCandidates(chat, model),
        max_n=state.backend.info.max_candidates or MAX_HEAL_N,
    )
