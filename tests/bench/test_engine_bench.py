"""`whiz bench engine`'s measurements and report, on the fake engine beside a stub llama.cpp."""

import json

import numpy as np

from whiz.bench.engine import EnginePlan, Run, WhizSide, measure_model, print_report, summarize
from whiz.engine.fake import FakeRuntime
from whiz.engine.scheduler import Scheduler
from whiz.engine.types import EngineInfo

TOP_KEYS = {
    "bench", "date", "cpu", "threads", "whiz_decode_tok_s", "llama_decode_tok_s", "ratio",
    "whiz_prefill_tok_s", "llama_prefill_tok_s", "prefill_ratio", "models", "load_average",
}  # fmt: skip


class Rambler(FakeRuntime):
    """Writes "x" forever after any prompt, as a model continuing source code does."""

    def _logits(self, history: list[int]) -> np.ndarray:
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        logits[ord("x")] = self.confidence
        return logits


def rambling_engine() -> Scheduler:
    runtime = Rambler(n_ctx=8192, step_s=0.002)
    return Scheduler(runtime, EngineInfo(model="fake", n_ctx=8192, n_ctx_train=8192, n_seq_max=4))


class StubLlama:
    """A baseline at fixed speeds, writing what the prompt's first byte says."""

    name = "llama.cpp"

    def __init__(self) -> None:
        self.prompts: list[int] = []

    def run(self, prompt: list[int], n: int) -> Run:
        self.prompts.append(len(prompt))
        return Run(prefill_tok_s=1000.0, decode_tok_s=100.0, tokens=[prompt[0]] * (n + 1))


def test_the_report_compares_both_sides_per_context_and_ends_with_one_json_line(capsys):
    engine = rambling_engine()
    stub = StubLlama()
    plan = EnginePlan(("fake",), threads=2, quick=True)
    try:
        result = measure_model(engine, stub, plan, progress=lambda _: None)
    finally:
        engine.close()
    print_report(summarize({"fake": result}, plan))
    out = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(out[-1])
    assert set(summary) >= TOP_KEYS and summary["bench"] == "engine" and summary["threads"] == 2
    short, long = (summary["models"]["fake"]["contexts"][k] for k in ("short", "long"))
    assert (short["prompt_tokens"], long["prompt_tokens"]) == (32, 1024)
    # The stub decodes at 100 tok/s: the ratio is whiz's speed over it, from the same rounds.
    assert summary["whiz_decode_tok_s"] > 0 and summary["llama_decode_tok_s"] == 100.0
    assert abs(summary["ratio"] - summary["whiz_decode_tok_s"] / 100.0) < 0.05 * summary["ratio"] + 1e-3
    assert summary["prefill_ratio"] > 0 and long["llama_prefill_tok_s"] == 1000.0
    # Each round of each context, then the speculation prompts, ran on the baseline too.
    assert stub.prompts.count(32) == plan.rounds_for("short") and stub.prompts.count(1024) == plan.rounds
    spec = summary["models"]["fake"]["speculation"]
    assert spec["identical"] is True and spec["spec_decode_tok_s"] > 0
    table = "\n".join(out[:-1])
    assert "decode" in table and "prefill" in table and "identical" in table
    assert "busy" not in table  # no load average given


def test_a_report_from_a_busy_machine_says_its_figures_mean_little(capsys):
    engine = rambling_engine()
    plan = EnginePlan(("fake",), threads=2, quick=True, speculation=False)
    try:
        result = measure_model(engine, StubLlama(), plan, progress=lambda _: None)
    finally:
        engine.close()
    # Two threads of its own: a load of 2 is the bench itself, 7 is other work beside it.
    print_report(summarize({"fake": result}, plan, load=(0.2, 7.0)))
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[-1])["load_average"] == [0.2, 7.0]
    assert "The machine was busy" in " ".join(out[:-1])
    print_report(summarize({"fake": result}, plan, load=(0.3, 2.2)))
    assert "busy" not in capsys.readouterr().out


def test_whiz_side_times_the_decode_after_the_first_token():
    engine = rambling_engine()
    try:
        run = WhizSide(engine).run(list(b"hello"), 20)
    finally:
        engine.close()
    assert len(run.tokens) == 21
    # 20 decode steps of at least 2 ms each: no faster than 500 tok/s.
    assert 0 < run.decode_tok_s <= 500 and run.prefill_tok_s > 0
