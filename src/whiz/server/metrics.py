"""Counters for GET /metrics, in Prometheus' text format."""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from whiz.server.waiting import WaitingConnections


def rss_bytes() -> int | None:
    """This process's resident memory (Linux), for `process_resident_memory_bytes`."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Metrics:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.output_tokens = 0
        self.ttft_ms_sum = 0.0
        self.responses = 0
        self.ws_sessions = 0
        self.connections: WaitingConnections | None = None
        """The server's waiting connections, where it runs under `listen.uvicorn_config`."""

    def request(self, api: str) -> None:
        self.requests[api] += 1

    def error(self, code: str) -> None:
        self.errors[code] += 1

    def finished(self, response: dict | None) -> None:
        """Count a finished Responses-API or chat response from its usage and timings."""
        if not response:
            return
        usage = response.get("usage") or {}
        self.prompt_tokens += usage.get("input_tokens", usage.get("prompt_tokens", 0))
        details = usage.get("input_tokens_details") or usage.get("prompt_tokens_details") or {}
        self.cached_tokens += details.get("cached_tokens", 0)
        self.output_tokens += usage.get("output_tokens", usage.get("completion_tokens", 0))
        self.ttft_ms_sum += (response.get("whiz") or {}).get("ttft_ms", 0.0)
        self.responses += 1

    def render(self, backend_status: dict) -> str:
        """Prometheus text: these counters, then the backend's gauges (names after `whiz_`)."""
        lines = [
            "# TYPE whiz_requests_total counter",
            *(f'whiz_requests_total{{api="{k}"}} {v}' for k, v in sorted(self.requests.items())),
            "# TYPE whiz_errors_total counter",
            *(f'whiz_errors_total{{code="{k}"}} {v}' for k, v in sorted(self.errors.items())),
            "# TYPE whiz_prompt_tokens_total counter",
            f"whiz_prompt_tokens_total {self.prompt_tokens}",
            "# TYPE whiz_cached_tokens_total counter",
            f"whiz_cached_tokens_total {self.cached_tokens}",
            "# TYPE whiz_output_tokens_total counter",
            f"whiz_output_tokens_total {self.output_tokens}",
            "# TYPE whiz_ttft_ms_sum counter",
            f"whiz_ttft_ms_sum {self.ttft_ms_sum:.1f}",
            "# TYPE whiz_responses_total counter",
            f"whiz_responses_total {self.responses}",
            "# TYPE whiz_websocket_sessions gauge",
            f"whiz_websocket_sessions {self.ws_sessions}",
        ]
        if self.connections is not None:
            lines += [
                "# TYPE whiz_connections_waiting gauge",
                f"whiz_connections_waiting {len(self.connections)}",
                "# TYPE whiz_connections_timed_out_total counter",
                f"whiz_connections_timed_out_total {self.connections.expired}",
                "# TYPE whiz_connections_evicted_total counter",
                f"whiz_connections_evicted_total {self.connections.evicted}",
            ]
        if (rss := rss_bytes()) is not None:  # Prometheus' standard name, so dashboards know it
            lines += ["# TYPE process_resident_memory_bytes gauge", f"process_resident_memory_bytes {rss}"]
        typed: set[str] = set()
        for k, v in backend_status.items():
            name = "whiz_" + k.split("{", 1)[0]
            if name not in typed:  # one TYPE line per metric, however many label sets follow
                typed.add(name)
                lines.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
            lines.append(f"whiz_{k} {v}")
        return "\n".join(lines) + "\n"
