"""The bodies of `POST /infill` (llama.cpp's server) and `POST /v1/completions` (OpenAI's legacy
Completions API) on the wire: the requests, validated, and the results shaped as each API's clients
read them. Plain functions of a finished completion, so the routes (`server/completions.py`) stay
short and the shapes are tested without a server.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from whiz.completion.fim import ExtraFile, FimInput
from whiz.completion.service import CompletionRequest, CompletionResult
from whiz.engine.types import SamplingParams
from whiz.errors import InvalidRequest
from whiz.server.protocol import INT64, MAX_STOP, Wire, bounded_stops, stop_list

MAX_EXTRA_FILES = 256


class Sampling(Wire):
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=-INT64, lt=INT64)
    stream: bool = False

    def sampling(self) -> SamplingParams:
        """Greedy unless the request asks otherwise: the same keystroke gets the same completion."""
        seed = None if self.seed is None else self.seed % 2**64
        return SamplingParams(self.temperature or 0.0, self.top_p or 1.0, self.top_k or 0, seed)


class ExtraChunk(Wire):
    filename: str = ""
    text: str


class InfillRequest(Sampling):
    """llama.cpp's /infill body (its other /completion options are accepted and ignored)."""

    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list, max_length=MAX_EXTRA_FILES)
    prompt: str = ""
    """The cursor's line up to the cursor, in llama.vim's and llama.vscode's requests."""
    n_predict: int | None = Field(default=None, ge=-1)
    t_max_predict_ms: float | None = Field(default=None, ge=0)
    n_indent: int = Field(default=0, ge=0)
    stop: str | list[str] | None = None
    id_slot: int | None = None
    response_fields: list[str] | None = None
    filename: str | None = None
    """whiz's: the path of the file being edited, for the repository-level prompt."""

    _stop = field_validator("stop")(bounded_stops(MAX_STOP))

    def completion_request(self) -> CompletionRequest:
        fim = FimInput(
            self.input_prefix + self.prompt,
            self.input_suffix,
            tuple(ExtraFile(c.filename, c.text) for c in self.input_extra),
            self.filename,
        )
        return CompletionRequest(
            fim,
            max_tokens=self.n_predict,
            sampling=self.sampling(),
            stop=stop_list(self.stop),
            n_indent=self.n_indent,
            t_max_predict_ms=self.t_max_predict_ms or None,
        )

    def client(self) -> str | None:
        """llama.cpp's slot, as whose keystrokes these are."""
        return f"slot:{self.id_slot}" if self.id_slot is not None and self.id_slot >= 0 else None


class CompletionsRequest(Sampling):
    """OpenAI's legacy Completions body."""

    model: str | None = None
    prompt: str | list[str]
    suffix: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    stop: str | list[str] | None = None
    echo: bool = False
    n: int = 1
    best_of: int | None = None
    logprobs: int | None = None
    user: str | None = None
    stream_options: dict | None = None

    _stop = field_validator("stop")(bounded_stops(MAX_STOP))

    def text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise InvalidRequest(
                "Send one prompt per request (a list of exactly one string).", param="prompt"
            )
        return self.prompt[0]

    def completion_request(self) -> CompletionRequest:
        """The request for the service, once `check()` passed: FIM when a suffix is given, else the
        prompt continued as it is."""
        prompt = self.text()
        fim = FimInput(prompt, self.suffix) if self.suffix is not None else None
        return CompletionRequest(
            fim,
            raw_prompt=prompt,
            max_tokens=self.max_tokens,
            sampling=self.sampling(),
            stop=stop_list(self.stop),
        )

    def check(self) -> None:
        if self.echo:
            raise InvalidRequest(
                "echo is not supported: the response holds the completion only.", param="echo"
            )
        if self.n != 1 or (self.best_of or 1) != 1:
            raise InvalidRequest(
                "This server returns one completion per request (n and best_of 1).", param="n"
            )
        if self.logprobs:
            raise InvalidRequest("logprobs are not supported.", param="logprobs")


def timings(result: CompletionResult) -> dict:
    s = result.stats
    out = {
        "cache_n": s.cached_tokens,
        "prompt_n": s.prefill_tokens,
        "prompt_ms": round(s.prefill_ms, 3),
        "predicted_n": result.output_tokens,
        "predicted_ms": round(s.decode_ms, 3),
    }
    for kind in ("prompt", "predicted"):
        n, ms = out[f"{kind}_n"], out[f"{kind}_ms"]
        out[f"{kind}_per_token_ms"] = round(ms / n, 3) if n else 0.0
        out[f"{kind}_per_second"] = round(n * 1000 / ms, 3) if ms else 0.0
    return out


def pick_fields(body: dict, fields: list[str]) -> dict:
    """llama.cpp's `response_fields`: only these, each under its own path ("timings/prompt_n")."""
    out = {}
    for path in fields:
        value: Any = body
        for part in path.split("/"):
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            out[path] = value
    return out


def fim_chars(fim: FimInput) -> int:
    return len(fim.before) + len(fim.after) + sum(len(f.text) + len(f.filename) for f in fim.extra)


def finish_reason(result: CompletionResult) -> str:
    return {"limit": "length", "cancelled": "cancelled"}.get(result.stop_type, "stop")


def usage(result: CompletionResult) -> dict:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.output_tokens,
        "total_tokens": result.prompt_tokens + result.output_tokens,
        "prompt_tokens_details": {"cached_tokens": result.stats.cached_tokens},
    }


def infill_body(
    result: CompletionResult, body: InfillRequest, req: CompletionRequest, *, model: str, n_ctx: int
) -> dict[str, Any]:
    """llama.cpp's /infill answer (its last streamed event, with the text left out there), cut to
    `response_fields` when the request names some."""
    slot = body.id_slot if body.id_slot is not None and body.id_slot >= 0 else None
    out = {
        "index": 0,
        "content": result.text,
        "tokens": [],
        "id_slot": -1 if slot is None else slot,
        "stop": True,
        "model": model,
        "tokens_predicted": result.output_tokens,
        "tokens_evaluated": result.prompt_tokens,
        "generation_settings": {
            "n_ctx": n_ctx,
            "n_predict": req.max_tokens if req.max_tokens is not None else -1,
            "temperature": req.sampling.temperature,
            "n_indent": body.n_indent,
        },
        "prompt": "",
        "has_new_line": "\n" in result.text,
        "truncated": result.truncated,
        "stop_type": "none" if result.stop_type == "cancelled" else result.stop_type,
        "stopped_eos": result.stop_type == "eos",
        "stopped_word": result.stop_type == "word",
        "stopped_limit": result.stop_type == "limit",
        "stopping_word": result.stopping_word,
        "tokens_cached": result.prompt_tokens + result.output_tokens,
        "timings": timings(result),
        "whiz": {"cancelled": result.stop_type == "cancelled"},
    }
    return pick_fields(out, body.response_fields) if body.response_fields else out


def infill_delta(text: str) -> dict[str, Any]:
    """One streamed /infill event before the last."""
    return {"index": 0, "content": text, "tokens": [], "stop": False, "id_slot": -1}


def text_completion(cid: str, created: int, model: str, text: str, finish: str | None) -> dict[str, Any]:
    """A `text_completion` object: a whole answer, or one streamed chunk of it."""
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
    return {"id": cid, "object": "text_completion", "created": created, "model": model, "choices": [choice]}
