"""Reading a client's existing configuration file, and merging whiz's settings into it.

A file that does not parse is never overwritten: `ConfigError` says where it fails, and nothing is
written. JSON files may hold comments and trailing commas (Zed's and Qwen Code's settings do):
those parse, but the rewrite is plain JSON, so the comments live on only in the backup. TOML keeps
its comments and layout (tomlkit). YAML (Aider) is rewritten plainly, like JSON.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from whiz.setup.base import ConfigError

try:  # the `setup` extra
    import tomlkit
    import yaml
except ImportError:  # pragma: no cover - checked in `needs_extra`
    tomlkit = yaml = None  # type: ignore[assignment]


def needs_extra() -> None:
    """`ConfigError` saying how to install what writing TOML and YAML needs, where it is missing."""
    if tomlkit is None or yaml is None:
        raise ConfigError("whiz setup needs tomlkit and PyYAML: pip install 'whiz[setup]'")


def unreadable(path: Path, kind: str, why: str) -> ConfigError:
    """The error for a config file whiz setup will not touch: where and why, and what to do."""
    return ConfigError(
        f"{path} is not valid {kind} ({why}); fix it or move it away, then run whiz setup again. "
        "Nothing was written."
    )


def read_text(path: Path) -> str | None:
    """The file's text, or None where there is no file; `ConfigError` where it cannot be read."""
    if not path.exists():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; nothing was written") from None


def load_json(path: Path) -> tuple[dict[str, Any], bool]:
    """The JSON object in `path` ({} where there is none) and whether it had comments."""
    text = read_text(path)
    if text is None or not text.strip():
        return {}, False
    plain = strip_jsonc(text)
    try:
        data = json.loads(plain)
    except json.JSONDecodeError as exc:
        raise unreadable(path, "JSON", f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise unreadable(path, "JSON", "it holds no object at the top")
    return data, _without_comments(text) != text


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_toml(path: Path) -> Any:
    """The TOML document in `path` (empty where there is none), comments and layout kept."""
    needs_extra()
    text = read_text(path)
    try:
        return tomlkit.parse(text or "")
    except tomlkit.exceptions.ParseError as exc:
        raise unreadable(path, "TOML", str(exc)) from None


def load_yaml(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path` ({} where there is none)."""
    needs_extra()
    text = read_text(path)
    try:
        data = yaml.safe_load(text or "") or {}
    except yaml.YAMLError as exc:
        raise unreadable(path, "YAML", str(exc)) from None
    if not isinstance(data, dict):
        raise unreadable(path, "YAML", "it holds no mapping at the top")
    return data


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def merge(into: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`into` with `new`'s keys set, tables merged key by key (the user's other keys stay)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def strip_jsonc(text: str) -> str:
    """JSON with comments (`//`, `/* */`) and trailing commas as plain JSON; strings are left as
    they are (a URL's `//` is no comment)."""
    return _without_trailing_commas(_without_comments(text))


def _strings_and_rest(text: str):
    """(piece, is_string) pieces of `text`, in order: JSON strings whole, and what lies between."""
    i, n, start = 0, len(text), 0
    while i < n:
        if text[i] == '"':
            if start < i:
                yield text[start:i], False
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            yield text[i : j + 1], True
            i = start = j + 1
        else:
            i += 1
    if start < n:
        yield text[start:], False


def _without_comments(text: str) -> str:
    out = []
    pending = ""
    for piece, is_string in _strings_and_rest(text):
        if is_string and not pending:
            out.append(piece)
            continue
        if pending:  # inside a comment that a string-looking piece continues
            piece, pending = pending + piece, ""
        cleaned, pending = _drop_comments(piece)
        out.append(cleaned)
    return "".join(out)


def _drop_comments(piece: str) -> tuple[str, str]:
    """`piece` (no strings in it) without its comments, and an unfinished comment's text."""
    out, i = [], 0
    while i < len(piece):
        if piece.startswith("//", i):
            end = piece.find("\n", i)
            if end < 0:
                return "".join(out), piece[i:]
            i = end
        elif piece.startswith("/*", i):
            end = piece.find("*/", i + 2)
            if end < 0:
                return "".join(out), piece[i:]
            i = end + 2
        else:
            out.append(piece[i])
            i += 1
    return "".join(out), ""


def _without_trailing_commas(text: str) -> str:
    out = []
    for piece, is_string in _strings_and_rest(text):
        out.append(piece if is_string else re.sub(r",(\s*[}\]])", r"\1", piece))
    return "".join(out)
