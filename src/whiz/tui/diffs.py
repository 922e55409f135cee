"""Unified diffs as rich text: each line highlighted in its file's language, on a red or green ground.

rich's own "diff" lexer only colours whole lines; reading a change is easier when the code keeps
its syntax colours, so every line is highlighted with the lexer its path suggests.
"""

from __future__ import annotations

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text

ADDED_BG = "on #12361f"
REMOVED_BG = "on #3f1518"
THEME = "monokai"


def render_diff(diff: str, *, titles: bool = True) -> Group:
    """A unified diff (one or more files) as highlighted rich text; `titles` puts each path first."""
    lines: list[Text] = []
    syntax = _syntax_for("/dev/null")
    for raw in diff.splitlines():
        if raw.startswith("+++ ") or raw.startswith("--- "):
            path = raw[4:].strip()
            if raw.startswith("+++ ") or path != "/dev/null":
                syntax = _syntax_for(path.removeprefix("a/").removeprefix("b/"))
            if raw.startswith("+++ ") and titles:
                lines.append(Text(_title(path), style="bold"))
            continue
        if raw.startswith("@@"):
            lines.append(Text(raw, style="cyan dim"))
        elif raw.startswith("\\"):
            lines.append(Text(raw, style="dim italic"))
        elif raw[:1] in ("+", "-", " "):
            lines.append(_code_line(syntax, raw[0], raw[1:]))
        else:
            lines.append(Text(raw))
    return Group(*lines)


def _title(path: str) -> str:
    return path.removeprefix("b/") if path != "/dev/null" else "(deleted)"


def _syntax_for(path: str) -> Syntax:
    lexer = Syntax.guess_lexer(path) if path != "/dev/null" else "text"
    return Syntax("", lexer, theme=THEME, background_color="default")


def _code_line(syntax: Syntax, sign: str, code: str) -> Text:
    body = syntax.highlight(code)
    body.rstrip()
    line = Text(sign + " ", style="bold green" if sign == "+" else "bold red" if sign == "-" else "dim")
    line.append_text(body)
    if sign == "+":
        line.stylize(ADDED_BG)
    elif sign == "-":
        line.stylize(REMOVED_BG)
    return line
