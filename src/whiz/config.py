"""Settings, layered in one place: defaults, then a config file, then WHIZ_* environment, then flags."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class ServeSettings(BaseModel):
    """Everything `whiz serve` can be told. Each field is also `WHIZ_<NAME>` and `--<name>`."""

    host: str = Field("127.0.0.1", description="Address to bind; loopback by default.")
    port: int = Field(8321, description="TCP port.")
    model: str = Field(
        "qwen2.5-coder-0.5b", description="Registry name, .gguf path, hf:owner/repo/file, or 'fake'."
    )
    model_name: str | None = Field(
        None, description="Model id reported by the API (default: the --model value)."
    )
    ctx: int | None = Field(
        None, description="Tokens one conversation may hold (default: the model's trained length)."
    )
    kv_budget_mb: int = Field(
        4096, description="Memory for the KV cache: it buys slots of `ctx` tokens each."
    )
    slots: int = Field(16, description="KV sequences: sessions kept warm at once.")
    threads: int | None = Field(None, description="CPU threads for llama.cpp (default: all cores).")
    speculation: bool = Field(
        True, description="Draft tokens (prediction, prompt lookup) and verify them in batches."
    )
    max_draft: int = Field(32, description="Longest draft verified in one batch.")
    api_keys: list[str] = Field(default_factory=list, description="Accepted bearer keys; none means no auth.")
    rate_limit_rpm: int = Field(0, description="Requests per minute per key (0: unlimited).")
    temperature: float = Field(0.7, description="Sampling temperature when a request sets none.")
    top_p: float = Field(0.8, description="Nucleus sampling when a request sets none.")
    top_k: int = Field(20, description="Top-k sampling (not part of OpenAI's API).")
    max_body_mb: float = Field(16, description="Largest request body accepted.")
    stored_responses: int = Field(256, description="Responses kept for previous_response_id over HTTP.")
    workspace: Path | None = Field(
        None, description="Folder the web app may browse and edit (nothing outside it is reachable)."
    )
    test_cmd: str | None = Field(
        None, description="Shell command the web app runs in the workspace on request (e.g. 'pytest -q')."
    )
    test_timeout_s: float = Field(300, description="Longest a --test-cmd run may take before it is killed.")
    draft_model: str | None = Field(
        None,
        description="A smaller model with the same tokenizer that drafts tokens for --model, which "
        "verifies them (e.g. qwen2.5-coder-0.5b for qwen2.5-coder-1.5b). Output is unchanged.",
    )


def env_overrides(prefix: str = "WHIZ_") -> dict[str, Any]:
    """WHIZ_* variables that name a ServeSettings field. WHIZ_API_KEYS is comma-separated."""
    out: dict[str, Any] = {}
    for name in ServeSettings.model_fields:
        value = os.environ.get(prefix + name.upper())
        if value is None or value == "":
            continue
        out[name] = [k.strip() for k in value.split(",") if k.strip()] if name == "api_keys" else value
    return out


def load_settings(config_file: Path | None = None, **flags: Any) -> ServeSettings:
    """Merge the layers: defaults < config file ([serve] table) < environment < flags (None = unset)."""
    merged: dict[str, Any] = {}
    if config_file is not None:
        with open(config_file, "rb") as f:
            merged.update(tomllib.load(f).get("serve", {}))
    merged.update(env_overrides())
    merged.update({k: v for k, v in flags.items() if v is not None and v != []})
    return ServeSettings.model_validate(merged)
