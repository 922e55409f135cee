"""The batch engine: one worker thread drives the runtime; asyncio callers get token streams.

Every running request is a `Job` bound to a KV slot. Each step of the worker builds one batch
holding one token for every decoding job and a chunk of prompt for jobs still prefilling, so
several sessions decode together and a long prefill never stalls the others for long. Logits are
requested only for rows whose next token is sampled.

Candidates of one prompt (`generate_many`) are jobs that share it: the first prefills the prompt,
the others wait for it and then start from a copy of its cache cells, and all of them decode in
the same batches.

All runtime calls happen on the worker thread (llama.cpp contexts are not thread-safe); ctypes
releases the GIL during a decode, so the event loop stays responsive. Cancelling sets a flag the
worker reads before every step, so a cancel takes effect within one decode step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import numpy as np

from whiz.engine.draft_model import DraftModel
from whiz.engine.drafters import ChainDrafter, PredictionDrafter, PromptLookupDrafter
from whiz.engine.grammar import Constraint, MatchingClock
from whiz.engine.grammar_process import GrammarProcess
from whiz.engine.grammar_share import GrammarShare, matching
from whiz.engine.grammar_thread import GrammarThread, GrammarTooSlow, GrammarUnavailable
from whiz.engine.prefix_cache import PrefixCache
from whiz.engine.sampling import sample
from whiz.engine.slots import Placement, SlotTable
from whiz.engine.speculative import BatchCost, DraftLength, verify
from whiz.engine.step_budget import StepBudget
from whiz.engine.types import EngineInfo, GenerateRequest, GenerationStats, TokenChunk
from whiz.errors import ContextOverflow, KVCacheFull
from whiz.seams import Runtime

_END = object()
log = logging.getLogger("whiz.engine")


class TokenStream:
    """The asyncio side of one job: iterate for token chunks, `cancel()` to stop early."""

    def __init__(self, loop: asyncio.AbstractEventLoop, job: Job):
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._job = job
        self.stats = job.stats

    def _push(self, item: object) -> None:
        # Called from the worker thread.
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            # The loop that read this stream is closed (its program ended mid-reply): nobody is
            # listening, so the job stops like a cancelled one instead of failing the worker.
            self._job.cancelled = True

    def __aiter__(self) -> AsyncIterator[TokenChunk]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TokenChunk]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    def cancel(self) -> None:
        self._job.cancelled = True


@dataclass(eq=False)
class Job:
    request: GenerateRequest
    stats: GenerationStats = field(default_factory=GenerationStats)
    stream: TokenStream | None = None
    cancelled: bool = False
    placement: Placement | None = None
    feed: list[int] = field(default_factory=list)
    """Tokens to put into the cache next (prompt chunks, then the last sampled token)."""
    n_past: int = 0
    generated: int = 0
    rng: np.random.Generator | None = None
    context: list[int] = field(default_factory=list)
    """Prompt and output so far: what drafters draft from."""
    drafter: ChainDrafter | None = None
    leader: Job | None = None
    """For the later candidates of `generate_many`: the job that prefills the shared prompt."""
    prompt_done: bool = False
    """The whole prompt is in the cache."""
    constraint: Constraint | None = None
    """The request's grammar, following this job's output (None: the output is free)."""
    t_submit: float = 0.0
    t_first: float = 0.0

    @property
    def decoding(self) -> bool:
        return self.generated > 0


class Scheduler:
    """An `Engine` over any `Runtime`: continuous batching, prefix reuse, cancel."""

    def __init__(
        self,
        runtime: Runtime,
        info: EngineInfo,
        *,
        n_batch: int = 512,
        prefill_chunk: int = 256,
        speculation: bool = True,
        max_draft: int = 32,
        draft_model: DraftModel | None = None,
        prefix_cache: PrefixCache | None = None,
        max_slots_per_tenant: int | None = None,
    ):
        self.runtime = runtime
        self.max_slots_per_tenant = max_slots_per_tenant
        """Most slots one tenant's requests (one API key's) hold at once; its further requests wait
        while other tenants' start, so one key cannot take every slot. None: no cap. Requests with
        no tenant (a server without keys: one owner) are never capped."""
        self.prefix_cache = prefix_cache
        self.speculation = speculation
        self.max_draft = max_draft
        self.draft_model = draft_model
        self.batch_cost = BatchCost(runtime.batch_costs_ms)
        self.step_budget = StepBudget(self.batch_cost, most_rows=n_batch)
        """The most rows a step holds while other requests wait on it (step_budget.py)."""
        self.tokenizer = runtime.tokenizer
        self.info = info
        self.slots = SlotTable(runtime.n_seq_max)
        self.n_batch = n_batch
        self.prefill_chunk = prefill_chunk
        self._inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._waiting: list[Job] = []
        self._active: list[Job] = []
        self._closed = False
        self.steps = 0
        self.evictions = 0
        self.grammar_share = GrammarShare()
        """Grammar matching's share of the engine's time while other streams run."""
        self.matching_clock = MatchingClock().install()
        """Grammar budgets' clock: the engine thread's CPU time less its garbage collections."""
        spec = getattr(runtime, "grammar_spec", None)
        self.grammar_thread: GrammarThread | GrammarProcess = (
            GrammarProcess(spec) if spec is not None else GrammarThread(clock=self.matching_clock)
        )
        """Where grammar matcher calls run, under a deadline: a child process killed past it, where
        the runtime can build matchers there (grammar_process.py), else a thread (grammar_thread.py)."""
        self.restarts = 0
        """Times the worker loop failed outside a step and was started again."""
        self._thread = threading.Thread(target=self._supervise, name="whiz-engine", daemon=True)
        self._thread.start()

    # -- the asyncio side ---------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """The worker thread runs (a closed engine's does not)."""
        return self._thread.is_alive()

    def _ensure_worker(self) -> None:
        # The supervisor restarts the loop after a failure; this covers a thread that died anyway
        # (killed by something no `except` sees), so no request waits on a worker that is gone.
        if not self._closed and not self._thread.is_alive():
            self.restarts += 1
            self._fail_all("the engine's worker stopped; it was restarted, retry the request")
            self._thread = threading.Thread(target=self._supervise, name="whiz-engine", daemon=True)
            self._thread.start()

    def generate(self, request: GenerateRequest) -> TokenStream:
        """Queue a request and return its stream. Raises ContextOverflow before queueing."""
        self._ensure_worker()
        self._check(request)
        job = self._job(request)
        self._inbox.put(job)
        return job.stream

    def generate_many(self, request: GenerateRequest, n: int) -> list[TokenStream]:
        """Queue `n` candidates of one request; return their streams, in order.

        The prompt is prefilled once: the first candidate prefills it, the others then copy its
        cache cells and all of them decode together, one batch per step. With a seed, candidate
        i samples with seed + i, so candidates differ at temperature > 0 and each repeats.
        Only the first candidate keeps the request's session.
        """
        if not 1 <= n <= self.info.n_seq_max:
            raise ValueError(f"n must be between 1 and {self.info.n_seq_max} (the engine's sequences)")
        self._ensure_worker()
        self._check(request)
        jobs = []
        for i in range(n):
            seed = request.sampling.seed
            sampling = replace(request.sampling, seed=None if seed is None else seed + i)
            mine = request if i == 0 else replace(request, sampling=sampling, session=None)
            jobs.append(self._job(mine, leader=jobs[0] if jobs else None))
        for job in jobs:
            self._inbox.put(job)
        return [job.stream for job in jobs]

    def _check(self, request: GenerateRequest) -> None:
        limit = self.info.n_ctx
        if not request.prompt:
            raise ValueError("a generation needs at least one prompt token")
        if len(request.prompt) >= limit:
            raise ContextOverflow(len(request.prompt), limit)
        # Output beyond the window is cut, as OpenAI does with max_tokens: finish_reason "length".
        request.max_tokens = max(0, min(request.max_tokens, limit - len(request.prompt)))

    def _job(self, request: GenerateRequest, leader: Job | None = None) -> Job:
        job = Job(request=request, t_submit=time.perf_counter(), leader=leader)
        job.stats.prompt_tokens = len(request.prompt)
        job.rng = np.random.default_rng(request.sampling.seed)
        if request.grammar is not None:
            job.constraint = Constraint(
                request.grammar,
                self.tokenizer,
                self.runtime.grammar,
                notes=job.stats.notes,
                clock=self.matching_clock,
                runner=self.grammar_thread,
            )
        job.stream = TokenStream(asyncio.get_running_loop(), job)
        return job

    def close(self) -> None:
        """Stop the worker, then free the runtimes (a worker stuck in a decode keeps them)."""
        self._closed = True
        self.matching_clock.remove()
        self.grammar_thread.close()
        self._inbox.put(None)
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            return
        if self.prefix_cache is not None:
            self.prefix_cache.close()
        for runtime in (self.runtime, self.draft_model.runtime if self.draft_model else None):
            close = getattr(runtime, "close", None)
            if close is not None:
                close()

    def status(self) -> dict:
        """Counters for /metrics and /health. A dead worker is reported, then restarted."""
        alive = self.alive or self._closed
        self._ensure_worker()
        return {
            "active": len(self._active),
            "waiting": len(self._waiting),
            "steps": self.steps,
            "evictions": self.evictions,
            "worker_alive": int(alive),
            "worker_restarts": self.restarts,
            "slots": len(self.slots.slots),
            "slots_busy": sum(1 for s in self.slots.slots if s.busy),
            "cached_tokens": self.slots.cached_tokens(),
            # What drafting is decided from (speculative.DraftLength): if no draft could pay at
            # these costs, the server decodes plainly, and this is where to see why.
            **{f'batch_ms{{rows="{n}"}}': round(ms, 2) for n, ms in self.batch_cost.points},
            "drafts_can_pay": int(self.speculation and not DraftLength(self.batch_cost).hopeless),
            **({"draft_model_tokens": self.draft_model.drafted_tokens} if self.draft_model else {}),
            **(self.prefix_cache.status() if self.prefix_cache else {}),
        }

    # -- the worker thread --------------------------------------------------------------------

    def _supervise(self) -> None:
        """Run the worker loop; if it fails outside a step, fail the jobs in flight and go on.

        A failure inside a step ends the jobs of that step (see `_run`); one elsewhere (admitting,
        placing, a bug) would otherwise end the thread and leave every stream waiting forever.
        """
        while not self._closed:
            try:
                self._run()
                return
            except Exception as exc:
                log.exception("engine worker failed; restarting it")
                self.restarts += 1
                self._fail_all(f"the engine failed: {exc}")
            except BaseException:
                # Something no worker should survive: end the jobs in flight so no stream waits on
                # a dead thread; the next request or health check starts a new one.
                self._fail_all("the engine's worker stopped; retry the request")
                raise

    def _fail_all(self, error: str) -> None:
        """End every job with an error and forget every slot's cache (it may hold half a batch)."""
        jobs = self._active + self._waiting
        self._active, self._waiting = [], []
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._closed = True
            else:
                jobs.append(item)
        for job in jobs:
            job.stats.error = error
            with contextlib.suppress(Exception):
                self._finish(job, "error")
            with contextlib.suppress(Exception):  # again, in case _finish failed: a stream must end
                job.stream._push(_END)
        for slot in self.slots.slots:
            slot.busy, slot.tokens, slot.session, slot.tenant = False, [], None, None
            with contextlib.suppress(Exception):
                self.runtime.seq_rm(slot.seq, 0, -1)

    def _run(self) -> None:
        while not self._closed:
            block = not self._active and not self._waiting
            if not self._take_inbox(block):
                return
            # Cancelled jobs first: their slots are then free for the jobs just arrived. An editor
            # cancels a completion and sends the next keystroke's at once; placed while the old
            # job still held the session's slot, the new one would miss the cache it extends.
            self._drop_cancelled()
            self._admit()
            if not self._active:
                if self._waiting:
                    time.sleep(0.001)
                continue
            try:
                self._step()
            except Exception as exc:  # a runtime failure ends the jobs in flight, not the engine
                for job in list(self._active):
                    job.stats.error = str(exc)
                    self._finish(job, "error")

    def _take_inbox(self, block: bool) -> bool:
        try:
            item = self._inbox.get(block=block)
        except queue.Empty:
            return True
        while True:
            if item is None:
                return False
            self._waiting.append(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _admit(self) -> None:
        still_waiting = []
        for job in self._waiting:
            try:
                if not self._admit_one(job):
                    still_waiting.append(job)
            except Exception as exc:  # this job's request broke placement: fail it, not the others
                log.exception("admitting a job failed")
                job.stats.error = f"the engine could not start this request: {exc}"
                self._finish(job, "error")  # frees its slot, if it got one
        self._waiting = still_waiting

    def _admit_one(self, job: Job) -> bool:
        """Start `job` if it can start now (or end it, cancelled); False when it must go on waiting."""
        if job.cancelled:
            self._finish(job, "cancelled")
            return True
        if job.leader is not None and not job.leader.prompt_done:
            if job.leader.stats.finish_reason is None:
                # Wait for the shared prompt: placed now, this job would prefill it again.
                return False
            # The leader stopped before its prompt was in (cancelled): this job leads instead.
            old, job.leader = job.leader, None
            for other in self._waiting:
                if other.leader is old:
                    other.leader = job
        req = job.request
        if self._tenant_full(req.tenant):
            return False
        near = job.leader.placement.slot.seq if job.leader is not None and job.leader.placement else None
        placement = self.slots.place(
            req.prompt,
            req.session,
            need_logits=req.max_tokens > 0,
            near=near,
            tenant=req.tenant,
            reuse_chunk=req.reuse_chunk if getattr(self.runtime, "can_shift", False) else 0,
        )
        if placement is not None and self.prefix_cache is not None:
            # None while a longer prefix saved on disk is read, to restore instead of prefilling.
            placement = self.prefix_cache.improve(
                self.runtime, req.prompt, placement, need_logits=req.max_tokens > 0, tenant=req.tenant
            )
        if placement is None:
            return False
        self._start(job, placement)
        return True

    def _tenant_full(self, tenant: str | None) -> bool:
        if tenant is None or self.max_slots_per_tenant is None:
            return False
        held = sum(1 for job in self._active if job.request.tenant == tenant)
        return held >= self.max_slots_per_tenant

    def _start(self, job: Job, placement: Placement) -> None:
        slot, keep = placement.slot, placement.keep
        job.placement = placement  # first: if anything below fails, finishing the job frees the slot
        if placement.donor is not None:
            self.runtime.seq_rm(slot.seq, 0, -1)
            self.runtime.seq_cp(placement.donor.seq, slot.seq, 0, keep)
        else:
            for old, new, n in placement.moves:
                # Each chunk moves back over cells already dropped: what lay between it and the
                # reused part before it (text the prompt no longer has).
                self.runtime.seq_rm(slot.seq, new, old)
                self.runtime.seq_add(slot.seq, old, old + n, new - old)
            self.runtime.seq_rm(slot.seq, keep, -1)
        req = job.request
        for other in self.slots.slots:
            if (
                other is not slot
                and req.session is not None
                and (other.session, other.tenant)
                == (
                    req.session,
                    req.tenant,
                )
            ):
                other.session = None
        slot.tokens = req.prompt[:keep]
        slot.busy = True
        slot.session = req.session
        slot.tenant = req.tenant
        self.slots.touch(slot)
        job.n_past = keep
        job.feed = job.request.prompt[keep:]
        job.prompt_done = not job.feed
        job.stats.cached_tokens = keep
        job.stats.prefill_tokens = len(job.feed)
        req = job.request
        if self.speculation and req.speculation and req.max_tokens > 1:
            job.drafter = self._drafters(req, slot.seq)
            job.context = list(req.prompt)
        self._active.append(job)

    def _drafters(self, req: GenerateRequest, seq: int) -> ChainDrafter:
        """Prediction first, then prompt lookup (both free), then the draft model (costs time)."""

        def length(prior: float, draft_token_ms: float = 0.0) -> DraftLength:
            return DraftLength(
                self.batch_cost, max_len=self.max_draft, prior=prior, draft_token_ms=draft_token_ms
            )

        # A prediction is usually right where the code is unchanged; lookup guesses are riskier.
        chain = [(PredictionDrafter(req.prediction, len(req.prompt)), length(0.95))] if req.prediction else []
        chain.append((PromptLookupDrafter(), length(0.7)))
        if (
            self.draft_model is not None
            and (drafter := self.draft_model.drafter(seq, req.tenant)) is not None
        ):
            chain.append((drafter, length(0.7, self.draft_model.step_ms)))
        return ChainDrafter(chain)

    def _drop_cancelled(self) -> None:
        for job in list(self._active):
            if job.cancelled:
                self._finish(job, "cancelled")

    def _draft(self, job: Job) -> list[int]:
        if job.drafter is None:
            return []
        # Never draft past max_tokens or the end of the context window.
        room = min(job.request.max_tokens - job.generated - 1, self.info.n_ctx - job.n_past - 2)
        return job.drafter.propose(job.context, room) if room > 0 else []

    def _step(self) -> None:
        rows: list[tuple[int, int, int, bool]] = []
        sampled: list[tuple[Job, list[int]]] = []  # each job whose logits are read, with its draft
        prefilled: list[tuple[Job, int]] = []
        budget = self.n_batch
        if len({id(job.leader or job) for job in self._active}) > 1:
            # Other requests wait for this step: it must not take long. (One request's candidates
            # alone wait only for each other, and decode fastest in full batches.)
            budget = min(budget, self.step_budget.rows())
        # Grammar jobs beyond matching's share of this step wait for a later one (grammar_share.py).
        held = self.grammar_share.held(
            [job for job in self._active if job.decoding or len(job.feed) <= self.n_batch], self._active
        )
        # Decoding jobs first: their last token, plus a draft to verify, so they keep streaming
        # while others prefill.
        decoding = [job for job in self._active if job.decoding and job not in held]
        drafts = [self._draft(job) for job in decoding]
        if len(drafts) > 1:
            # llama.cpp takes the same number of rows from each sequence per forward pass, so
            # drafts of unequal length would cost an extra pass for the longer ones and hold up
            # every other sequence's step: all verify the same length.
            shortest = min(len(d) for d in drafts)
            drafts = [d[:shortest] for d in drafts]
        if decoding:
            # Drafts share what the step budget leaves after each job's own row, and leave half of
            # it to prompts waiting to be prefilled, which would otherwise never get a row.
            room = max(budget - len(decoding), 0)
            if any(not job.decoding and job.feed for job in self._active):
                room //= 2
            drafts = [d[: room // len(decoding)] for d in drafts]
        for job, draft in zip(decoding, drafts, strict=True):
            draft = draft[: max(budget - 1, 0)]
            seq = job.placement.slot.seq
            rows.append((job.feed[0], job.n_past, seq, True))
            rows.extend((t, job.n_past + 1 + i, seq, True) for i, t in enumerate(draft))
            sampled.append((job, draft))
            budget -= 1 + len(draft)
        prefill_cap = self.prefill_chunk if sampled else self.n_batch
        # Shortest prompt first: a short one gets its first token without waiting for a long one.
        for job in sorted(self._active, key=lambda j: len(j.feed)):
            if job.decoding or budget <= 0 or not job.feed:
                continue
            n = min(len(job.feed), budget, prefill_cap)
            if job in held and n == len(job.feed):
                n -= 1  # the prompt's last token, which samples under the grammar, waits
                if n == 0:
                    continue
            seq = job.placement.slot.seq
            wants = n == len(job.feed) and job.request.max_tokens > 0
            for i in range(n):
                rows.append((job.feed[i], job.n_past + i, seq, wants and i == n - 1))
            if wants:
                sampled.append((job, []))
            prefilled.append((job, n))
            budget -= n
        if not rows:
            # Only warm-up jobs whose prompt was fully cached are left.
            for job in list(self._active):
                if not job.feed:
                    self._finish(job, "stop")
            return
        t_decode = time.perf_counter()
        logits = self._decode_with_eviction(rows)
        if logits is None:
            return
        decode_ms = (time.perf_counter() - t_decode) * 1000
        self.grammar_share.earned(decode_ms)
        self.step_budget.observed(len(rows), decode_ms)
        self.steps += 1
        for job, n in prefilled:
            job.placement.slot.tokens.extend(job.feed[:n])
            job.n_past += n
            job.stats.prefilled_tokens += n
            del job.feed[:n]
            job.prompt_done = not job.feed
            if job.prompt_done and self.prefix_cache is not None:
                # The slot holds exactly the prompt now (sampled tokens go in next step): save it.
                slot, tenant = job.placement.slot, job.request.tenant
                self.prefix_cache.prompt_prefilled(self.runtime, slot.seq, slot.tokens, tenant=tenant)
            if not job.feed and job.request.max_tokens == 0:
                job.stats.prefill_ms = (time.perf_counter() - job.t_submit) * 1000
                self._finish(job, "stop")
        at = 0
        for job, draft in sampled:
            mine = logits[at : at + 1 + len(draft)]
            at += 1 + len(draft)
            t_sample = time.perf_counter() if matching(job) else None
            try:
                if job.decoding:
                    self._verified(job, draft, mine)
                else:
                    self._emit(job, [self._first_token(job, mine[0])])
            except (GrammarTooSlow, GrammarUnavailable) as exc:  # a bound, or matching not there now
                log.warning("a request's tool-call grammar was stopped: %s", exc)
                job.stats.error = str(exc)
                self._finish(job, "error")
            except Exception as exc:  # this job's sampling or drafting failed: the others go on
                log.exception("a job failed after its step")
                job.stats.error = f"the engine failed on this request: {exc}"
                self._finish(job, "error")
            if t_sample is not None:
                self.grammar_share.spent((time.perf_counter() - t_sample) * 1000)

    def _first_token(self, job: Job, logits: np.ndarray) -> int:
        if job.constraint is None:
            return sample(logits, job.request.sampling, job.rng)
        token = job.constraint.pick(logits, job.request.sampling, job.rng)
        job.constraint.accept(token)
        return token

    def _verified(self, job: Job, draft: list[int], logits: list[np.ndarray]) -> None:
        """Keep the part of the draft the model agreed with; roll the cache back past it."""
        verdict = verify(draft, logits, job.request.sampling, job.rng, job.constraint)
        kept = verdict.accepted
        slot = job.placement.slot
        if kept < len(draft):
            self.runtime.seq_rm(slot.seq, job.n_past + 1 + kept, -1)
        slot.tokens.append(job.feed[0])
        slot.tokens.extend(draft[:kept])
        job.n_past += 1 + kept
        if draft:
            job.stats.draft_accepted += kept
            job.stats.draft_rejected += len(draft) - kept
            job.drafter.update(len(draft), kept)
        self._emit(job, verdict.tokens)

    def _decode_with_eviction(self, rows: list[tuple[int, int, int, bool]]) -> list[np.ndarray] | None:
        while True:
            try:
                return self.runtime.decode(rows)
            except KVCacheFull:
                # Evicting idle sessions only frees room where sequences share one pool of cells.
                victim = self.slots.evictable() if self.runtime.shared_cache else None
                if victim is None:
                    # Nothing idle left to evict: fail the largest job so the others can go on.
                    job = max(self._active, key=lambda j: j.n_past + len(j.feed))
                    job.stats.error = "the KV cache is full; raise --kv-budget-mb or use fewer sessions"
                    self._finish(job, "error")
                    return None
                self.runtime.seq_rm(victim.seq, 0, -1)
                victim.tokens = []
                victim.session = None
                self.evictions += 1

    def _emit(self, job: Job, tokens: list[int]) -> None:
        """Stream a step's new tokens, stopping at end-of-generation or max_tokens."""
        now = time.perf_counter()
        if job.generated == 0:
            job.t_first = now
            job.stats.ttft_ms = (now - job.t_submit) * 1000
            job.stats.prefill_ms = job.stats.ttft_ms
        job.stats.decode_ms = (now - job.t_first) * 1000
        out: list[int] = []
        reason = None
        for token in tokens:
            if self.tokenizer.is_eog(token) or token in job.request.stop_tokens:
                reason = "stop"
                break
            out.append(token)
            if job.generated + len(out) >= job.request.max_tokens:
                reason = "length"
                break
        if out:
            job.generated += len(out)
            job.stats.decode_tokens = job.generated
            if job.drafter is not None:
                job.context.extend(out)
            job.stream._push(TokenChunk(tokens=out))
        if reason is not None:
            self._finish(job, reason)
        else:
            job.feed = [out[-1]]

    def _finish(self, job: Job, reason: str) -> None:
        job.stats.finish_reason = reason
        if job in self._active:
            self._active.remove(job)
        if job.placement is not None:
            slot = job.placement.slot
            slot.busy = False
            self.slots.touch(slot)
            if reason == "error":
                # After a failed decode the cache may hold part of a batch: forget the slot.
                self.runtime.seq_rm(slot.seq, 0, -1)
                slot.tokens = []
        job.stream._push(_END)
