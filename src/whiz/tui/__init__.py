"""The interactive terminal UI, `whiz code`: prompt_toolkit for the input and keys, rich for output."""

from whiz.tui.run import run_code

__all__ = ["run_code"]
