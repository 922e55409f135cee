"""Errors of the places where commands run."""

from __future__ import annotations

from whiz.errors import WhizError


class SandboxUnavailable(WhizError):
    """A confined mode was asked for, but this machine cannot confine commands; nothing was run.

    The message is one line that says what is missing and the two ways on: install bubblewrap, or
    choose `danger-full-access`.
    """

    code = "sandbox_unavailable"
