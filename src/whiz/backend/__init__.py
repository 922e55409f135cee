"""The message-level backend seam: what the APIs run a model turn on.

The APIs (chat completions, Responses over HTTP and WebSocket) speak messages; a backend turns a
`TurnRequest` into a stream of text deltas and tool calls with a `TurnResult` at the end. Two
backends exist: `whiz.backend.engine` (the embedded engine: chat template plus token ids) and
`whiz.gateway` (OpenAI-compatible upstream servers, one or several behind a router).
"""

from whiz.backend.types import BackendInfo, Resume, TextDelta, TurnRequest, TurnResult

__all__ = ["BackendInfo", "Resume", "TextDelta", "TurnRequest", "TurnResult"]
