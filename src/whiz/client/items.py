"""Builders for the Responses input items a client sends most."""

from __future__ import annotations

from typing import Any


def user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text}
