"""Settings, layered in one place: defaults, then a config file, then WHIZ_* environment, then flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from whiz.errors import InvalidRequest, did_you_mean
from whiz.flag import Flag

TENANT_HEADER = "x-whiz-tenant"
"""The header a gateway names its client's tenant in (a digest of the client's key), so that a
replica keeps tenants apart as one server does: cached prefixes, sessions, slot caps. Trusted
only from a key in `gateway_keys` (or on a server without keys). Here, below both the gateway
that sends it and the server that reads it."""

TENANT_KEPT_HEADER = "x-whiz-tenant-kept"
"""What a whiz server answers a request that named a tenant it honoured (value `1`): the gateway
trusts a replica to keep its keys apart only on this word, never on its own configuration."""


class UpstreamSpec(BaseModel):
    """One upstream as a config-file table: `upstreams = [{url = "...", key_env = "VLLM_KEY"}]`."""

    url: str = Field(description="Base URL of an OpenAI-compatible server (http://host:port or .../v1).")
    key: str | None = Field(None, description="Bearer key for this upstream.")
    key_env: str | None = Field(None, description="Environment variable that holds the key.")
    model: str | None = Field(None, description="Model id to ask for (default: --upstream-model).")
    prediction: bool | None = Field(None, description="Send Predicted Outputs (default: if it accepts them).")
    cache_key: bool | None = Field(None, description="Send prompt_cache_key (default: if it honours it).")


class EngineSettings(BaseModel):
    """The model and the engine that runs it: what decides what the KV cache holds and how fast it is."""

    model_config = ConfigDict(title="Model and engine")

    model: str = Field(
        "qwen2.5-coder-0.5b", description="Registry name, .gguf path, hf:owner/repo/file, or 'fake'."
    )
    ctx: int | None = Field(
        None, description="Tokens one conversation may hold (default: the model's trained length)."
    )
    kv_budget_mb: int = Field(
        4096, description="Memory for the KV cache: it buys slots of `ctx` tokens each."
    )
    slots: int = Field(16, description="KV sequences: sessions kept warm at once.")
    threads: int | None = Field(None, description="CPU threads for llama.cpp (default: all cores).")
    threads_follow_load: bool = Field(
        True,
        description="Decode on fewer threads while other programs keep cores busy (two threads "
        "sharing one core decode at a third of one thread's speed); --threads stays the most.",
    )
    speculation: bool = Field(
        True,
        description="Draft tokens (prediction, prompt lookup) and verify them in batches; the output is "
        "the same either way.",
    )
    max_draft: int = Field(32, description="Longest draft verified in one batch.")
    max_slots_per_key: int | None = Field(
        None,
        ge=1,
        description="Most slots one API key's requests hold at once; its other requests wait while "
        "other keys' start (default: half the slots when the server has keys; without keys there is "
        "one owner and no cap).",
    )
    draft_model: str | None = Field(
        None,
        description="A smaller model with the same tokenizer that drafts tokens for --model, which "
        "verifies them (e.g. qwen2.5-coder-0.5b for qwen2.5-coder-1.5b). Output is unchanged.",
    )
    prefix_cache: bool = Field(
        True,
        description="Keep long prompts' KV cache on disk, so a restarted server restores them instead of "
        "prefilling again (Codex's 6k-token first turn: over a minute on 2 cores).",
    )
    prefix_cache_dir: Path | None = Field(
        None, description="Folder of the prefix cache (default: WHIZ_HOME/kv)."
    )
    prefix_cache_gb: float = Field(
        4.0,
        gt=0,
        description="Most disk the prefix cache may take, in GiB, least recently used entries evicted first; "
        "an entry is ~12 MB per 1k tokens with the 0.5B model, and nothing is written with under 1 GB free.",
    )
    prefix_cache_min_tokens: int = Field(
        1024,
        ge=256,
        description="Shortest prompt saved, and the fewest new tokens a longer entry must add; one that "
        "only continues the entry it shares most with needs 256 (an agent's next request), and replaces "
        "that entry when it was such a short step too.",
    )


class SamplingSettings(BaseModel):
    """How tokens are chosen when a request does not say."""

    model_config = ConfigDict(title="Sampling")

    temperature: float = Field(0.7, description="Sampling temperature when a request sets none.")
    top_p: float = Field(0.8, description="Nucleus sampling when a request sets none.")
    top_k: int = Field(20, description="Top-k sampling (not part of OpenAI's API).")
    tool_grammar: bool = Field(
        True,
        description="When a request offers tools, decode each tool call the model starts under a grammar "
        "of the tools' JSON schemas, so the call parses and its arguments fit; text outside calls stays "
        'free. A request opts out with "whiz": {"tool_grammar": false}.',
    )


class HttpSettings(BaseModel):
    """Where the server listens, who may use it, and for how long it runs."""

    model_config = ConfigDict(title="Listening and access")

    host: str = Field("127.0.0.1", description="Address to bind; loopback by default.")
    port: int = Field(8321, description="TCP port.")
    model_name: str | None = Field(
        None, description="Model id reported by the API (default: the --model value)."
    )
    api_keys: Annotated[list[str], Flag("--api-key")] = Field(
        default_factory=list, description="Accepted bearer keys; none means no auth."
    )
    gateway_keys: Annotated[list[str], Flag("--gateway-key")] = Field(
        default_factory=list,
        description="Keys of gateways in front of this server (accepted as API keys): a request made "
        "with one keeps its client's tenant (X-Whiz-Tenant) apart from the others' cache, sessions "
        "and slots. A server without keys takes the tenant from any caller.",
    )
    rate_limit_rpm: int = Field(0, description="Requests per minute per key (0: unlimited).")
    allowed_hosts: Annotated[list[str], Flag("--allowed-host")] = Field(
        default_factory=list,
        description="Host names the server answers under, besides loopback names and --host (and, for "
        "a wildcard bind, this machine's names and addresses); '*' allows any.",
    )
    allowed_origins: Annotated[list[str], Flag("--allowed-origin")] = Field(
        default_factory=list,
        description="Browser origins (scheme://host:port) allowed besides the server's own pages.",
    )
    insecure_no_auth: bool = Field(
        False,
        description="Allow a non-loopback --host without --api-key (refused otherwise): anyone who "
        "reaches the port may spend its compute.",
    )
    idle_exit_s: Annotated[float, Flag(also=("--idle-exit",))] = Field(
        0,
        description="Exit after this many seconds without a request (0: never); background servers use 900.",
    )
    shutdown_grace_s: float = Field(
        3.0,
        ge=0,
        description="On SIGTERM, seconds running requests get to finish before they are cancelled.",
    )


class LimitSettings(BaseModel):
    """Bounds that keep one client from knocking the server over (OpenAI's published limits where
    it has them, nginx's and uvicorn's defaults elsewhere)."""

    model_config = ConfigDict(title="Limits")

    max_body_mb: float = Field(16, description="Largest request body accepted.")
    body_timeout_s: float = Field(
        60,
        gt=0,
        description="Longest a request's body may take to arrive, in all, after its headers; a slower "
        "one gets a 408 (nginx's client_body_timeout).",
    )
    max_output_tokens_default: int = Field(
        4096,
        ge=1,
        description="Output cap of a request that sets no max_tokens/max_output_tokens (without it, a "
        "request could generate to the end of the context window).",
    )
    max_n: int = Field(
        8, ge=1, description="Most candidates (`n`) one chat request may ask for; --slots bounds it too."
    )
    max_connections: int = Field(
        512,
        ge=1,
        description="Open connections (HTTP and WebSocket) the server holds at once; more get a 503 "
        "(nginx's default worker_connections).",
    )
    header_timeout_s: float = Field(
        10,
        gt=0,
        description="Longest a request's line and headers may take to arrive, from the connection's "
        "opening or the first byte of its next request; a slower one gets a 408 and the close.",
    )
    send_timeout_s: float = Field(
        60,
        gt=0,
        description="Longest a client may leave the server's answer unread (its buffers full) before the "
        "connection is dropped and its turn cancelled (nginx's send_timeout).",
    )
    keep_alive_s: int = Field(
        5, ge=1, description="Longest an idle keep-alive connection is kept between two requests."
    )
    max_waiting_per_address: int = Field(
        64,
        ge=1,
        description="Connections one client address may hold that have not sent a whole request head; "
        "past it, its oldest such connection is closed. They do not count toward --max-connections.",
    )
    max_waiting: int = Field(
        1024,
        ge=1,
        description="Connections without a whole request head, from all addresses; past it, the oldest "
        "is closed.",
    )
    max_ws_sessions: int = Field(256, ge=1, description="WebSocket sessions open at once, in all.")
    max_ws_sessions_per_key: int = Field(
        32, ge=1, description="WebSocket sessions open at once per API key (per client address without keys)."
    )
    ws_queue_max: int = Field(
        8, ge=1, description="response.create events one WebSocket may have waiting; more get an error."
    )
    stored_responses: int = Field(256, description="Responses kept for previous_response_id over HTTP.")
    stored_responses_mb: float = Field(
        64, gt=0, description="Memory the responses kept for previous_response_id may take, in all."
    )
    stored_response_ttl_s: float = Field(
        86400, gt=0, description="How long a stored response is kept for previous_response_id."
    )


class WebSettings(BaseModel):
    """The browser app's workspace: what the page may browse, edit and test."""

    model_config = ConfigDict(title="Web app")

    workspace: Path | None = Field(
        None, description="Folder the web app at / may browse and edit (nothing outside it is reachable)."
    )
    test_cmd: str | None = Field(
        None,
        description="Shell command the web app runs in the workspace on request (e.g. 'pytest -q'); "
        "healing runs it in each candidate's copy.",
    )
    test_timeout_s: float = Field(300, description="Longest a --test-cmd run may take before it is killed.")

    @field_validator("workspace")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        """A relative folder (or ~) is taken from where whiz started, as it would be on the command line."""
        return None if path is None else path.expanduser().resolve()


class GatewaySettings(BaseModel):
    """Serving on top of other engines (`whiz serve --upstream`), one or several."""

    model_config = ConfigDict(title="Upstreams and gateway")

    upstreams: Annotated[list[str | UpstreamSpec], Flag("--upstream")] = Field(
        default_factory=list,
        description="OpenAI-compatible servers (vLLM, llama-server, SGLang, another whiz, ...) to serve on "
        "top of instead of a local model. Several make whiz a gateway: a session stays on one replica, "
        "sick replicas leave the rotation, and a dead replica's sessions move with their history.",
    )
    upstream_key: str | None = Field(None, description="Bearer key sent to every upstream without its own.")
    upstream_model: str | None = Field(
        None, description="Model id to ask upstreams for (default: their first)."
    )
    upstream_timeout_s: float = Field(
        300.0, description="Longest an upstream may stay silent (before answering, or mid-stream)."
    )
    upstream_connect_timeout_s: float = Field(
        5.0, description="Longest to wait for an upstream's connection."
    )
    routing: Literal["affinity", "round-robin"] = Field(
        "affinity",
        description="affinity: a session stays on one replica; round-robin (for comparison): every turn "
        "moves on.",
    )
    health_interval_s: float = Field(2.0, description="Seconds between health checks of each upstream.")
    engine_only: bool = Field(
        False, description="Serve the model API only, as a replica behind a gateway (no web app, no agent)."
    )


class ServeSettings(
    EngineSettings, SamplingSettings, HttpSettings, LimitSettings, WebSettings, GatewaySettings
):
    """Everything `whiz serve` can be told: the components above, composed. Each field is a `[serve]`
    key in a config file, `WHIZ_<NAME>` in the environment and `--<name>` on the command line (a
    list's flag names one item: its `Flag`); `whiz serve`'s options are made from these fields, so
    their help and defaults are the descriptions and defaults here, under their component's title.
    Code that needs one part takes that component (the engine factory takes `EngineSettings`, say)."""

    model_config = ConfigDict(title="whiz serve")


def is_list(name: str) -> bool:
    """Whether the setting `name` holds a list (`WHIZ_<NAME>=a,b` in the environment)."""
    hint = ServeSettings.model_fields[name].annotation
    return get_origin(hint) is list or any(get_origin(a) is list for a in get_args(hint))


def env_overrides(prefix: str = "WHIZ_") -> dict[str, Any]:
    """WHIZ_* variables that name a ServeSettings field; WHIZ_API_KEYS and WHIZ_UPSTREAMS are lists (a,b)."""
    out: dict[str, Any] = {}
    for name in ServeSettings.model_fields:
        value = os.environ.get(prefix + name.upper())
        if value is None or value == "":
            continue
        out[name] = [k.strip() for k in value.split(",") if k.strip()] if is_list(name) else value
    return out


def file_settings(path: Path) -> dict[str, Any]:
    """The `[serve]` table of a TOML config file. A file that cannot be read, or a key that is no
    setting (which would leave the default in force without a word), is an InvalidRequest naming it."""
    from whiz.config_file import ConfigFile

    table = ConfigFile.read(path, required=True).table("serve")
    if not isinstance(table, dict):
        raise InvalidRequest(f"In {path}, [serve] must be a table of settings.", param="config")
    for key in table:
        if key not in ServeSettings.model_fields:
            hint = did_you_mean(key, ServeSettings.model_fields)
            raise InvalidRequest(f"Unknown setting '{key}' in the [serve] table of {path}{hint}.", param=key)
    return table


def load_settings(config_file: Path | None = None, **flags: Any) -> ServeSettings:
    """Merge the layers: defaults < config file ([serve] table) < environment < flags (None = unset)."""
    merged: dict[str, Any] = {}
    if config_file is not None:
        merged.update(file_settings(config_file))
    merged.update(env_overrides())
    merged.update({k: v for k, v in flags.items() if v is not None and v != []})
    try:
        return ServeSettings.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"][:2])
        raise InvalidRequest(f"Invalid setting '{where}': {err['msg']}.", param=where) from None
