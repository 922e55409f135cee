"""A starting `AGENTS.md` for a repository (`/init` in `whiz code`), written from what whiz can see
without a model: the layout and the central files from the repository map, the languages, the test
command where the project names one, and the conventions its config files show.

It is a start for the user to edit, short on purpose: every session puts it into the model's
instructions (`instructions.py`), and the default budget is about 1,200 tokens.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from whiz.agent.context.repomap import language_of, outline_files
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace

FILE_NAME = "AGENTS.md"
TOP_FOLDERS = 8
"""Folders of the layout listed; the rest are counted."""
CENTRAL_FILES = 3
"""The most referenced files named per folder."""

LANGUAGE_NAMES = {
    "python": "Python",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "tsx": "TypeScript",
    "go": "Go",
    "rust": "Rust",
    "java": "Java",
    "c": "C",
    "cpp": "C++",
    "ruby": "Ruby",
    "csharp": "C#",
    "kotlin": "Kotlin",
    "php": "PHP",
}


class AgentsFileExists(WhizAgentError):
    """There is an AGENTS.md already, and the user did not ask to replace it."""

    code = "agents_md_exists"


@dataclass
class Written:
    """What `/init` wrote, and where."""

    path: Path
    text: str
    replaced: bool


def write_agents_md(ws: Workspace, *, force: bool = False) -> Written:
    """Write a starting AGENTS.md at the workspace's root; `AgentsFileExists` when there is one and
    `force` is not given (nothing is written then)."""
    path = ws.root / FILE_NAME
    exists = path.exists() or path.is_symlink()
    if exists and not force:
        raise AgentsFileExists(f"{FILE_NAME} exists already; /init --force replaces it")
    ws.resolve(FILE_NAME)  # the workspace's own gate: no link out of it, nothing in .git
    text = starting_agents_md(ws)
    temporary = path.with_name(f".{FILE_NAME}.whiz-tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return Written(path, text, exists)


def starting_agents_md(ws: Workspace) -> str:
    """The text of a starting AGENTS.md for `ws`."""
    outlines = outline_files(ws)
    lines = [
        "# AGENTS.md",
        "",
        "Instructions for coding agents working in this repository. Keep them short and true: an agent",
        "reads all of this at the start of every session.",
        "",
        "## Layout",
        "",
        *layout(outlines),
    ]
    languages = language_counts([o.path for o in outlines])
    if languages:
        lines += [
            "",
            "## Languages",
            "",
            ", ".join(f"{name} ({count} files)" for name, count in languages) + ".",
        ]
    test_cmd = find_test_command(ws.root)
    lines += ["", "## Tests", ""]
    if test_cmd:
        lines.append(f"Run `{test_cmd}` after a change; the change is done when the tests pass.")
    else:
        lines.append("No test command was found; say here how to run the tests.")
    lines += ["", "## Conventions", "", *[f"- {rule}" for rule in conventions(ws.root)]]
    return "\n".join(lines) + "\n"


def layout(outlines: list) -> list[str]:
    """A line per top-level folder (its file count and most referenced files), then the files at the top."""
    by_folder: dict[str, list] = {}
    top_files = []
    for outline in outlines:
        head, _, rest = outline.path.partition("/")
        if rest:
            by_folder.setdefault(head, []).append(outline)
        else:
            top_files.append(outline.path)
    ranked = sorted(by_folder.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    lines = []
    for folder, files in ranked[:TOP_FOLDERS]:
        central = [o.path for o in sorted(files, key=lambda o: (-o.score, o.path)) if o.score > 0]
        named = f": most used {', '.join(f'`{p}`' for p in central[:CENTRAL_FILES])}" if central else ""
        lines.append(f"- `{folder}/` ({_files(len(files))}){named}")
    if len(ranked) > TOP_FOLDERS:
        lines.append(f"- and {len(ranked) - TOP_FOLDERS} more folders")
    if top_files:
        shown = ", ".join(f"`{p}`" for p in top_files[:12])
        more = f" and {len(top_files) - 12} more" if len(top_files) > 12 else ""
        lines.append(f"- at the top: {shown}{more}")
    return lines or ["- (no files yet)"]


def language_counts(paths: list[str]) -> list[tuple[str, int]]:
    """The languages of `paths` by file count, most first."""
    counts = Counter(LANGUAGE_NAMES[lang] for p in paths if (lang := language_of(p)) in LANGUAGE_NAMES)
    return counts.most_common()


def find_test_command(root: Path) -> str | None:
    """The command the project runs its tests with, where its files say: a Makefile's `test`
    target, package.json's test script, Cargo, Go, or pytest's configuration or test files."""
    makefile = _read(root / "Makefile")
    if re.search(r"^test\s*:", makefile, re.MULTILINE):
        return "make test"
    package = _json(root / "package.json")
    scripts = package.get("scripts") if isinstance(package, dict) else None
    if (
        isinstance(scripts, dict)
        and isinstance(scripts.get("test"), str)
        and "no test" not in scripts["test"]
    ):
        return "npm test"
    if (root / "Cargo.toml").is_file():
        return "cargo test"
    if (root / "go.mod").is_file():
        return "go test ./..."
    pyproject = _toml(root / "pyproject.toml")
    if (
        "pytest" in pyproject.get("tool", {})
        or (root / "pytest.ini").is_file()
        or (root / "conftest.py").is_file()
        or "[tool:pytest]" in _read(root / "setup.cfg")
        or any((root / "tests").glob("test_*.py"))
        or any(root.glob("test_*.py"))
    ):
        return "python -m pytest -q"
    return None


def conventions(root: Path) -> list[str]:
    """Rules the project's config files state, then the one every change should keep."""
    tool = _toml(root / "pyproject.toml").get("tool", {})
    rules = []
    ruff = tool.get("ruff") if isinstance(tool.get("ruff"), dict) else None
    if ruff is not None or (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file():
        width = (ruff or {}).get("line-length")
        extra = f"; lines of at most {width} characters" if isinstance(width, int) else ""
        rules.append(f"Python is linted and formatted with ruff (`ruff check`, `ruff format`){extra}.")
    if "black" in tool:
        rules.append("Python is formatted with black.")
    if "mypy" in tool or (root / "mypy.ini").is_file():
        rules.append("Python is type-checked with mypy: keep the annotations right.")
    if any(root.glob(".eslintrc*")) or any(root.glob("eslint.config.*")):
        rules.append("JavaScript/TypeScript is linted with ESLint.")
    if any(root.glob(".prettierrc*")):
        rules.append("Formatting follows Prettier.")
    if (root / "Cargo.toml").is_file():
        rules.append("Rust is formatted with `cargo fmt`.")
    if (root / "go.mod").is_file():
        rules.append("Go is formatted with `gofmt`.")
    if (root / ".editorconfig").is_file():
        rules.append("Indentation and line endings follow `.editorconfig`.")
    if (root / ".pre-commit-config.yaml").is_file():
        rules.append("pre-commit hooks check each commit (`pre-commit run --all-files`).")
    rules.append("Make the smallest change that does the task; keep names and formatting as they are.")
    return rules


def _files(count: int) -> str:
    return f"{count} file{'' if count == 1 else 's'}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(_read(path))
    except tomllib.TOMLDecodeError:
        return {}


def _json(path: Path) -> object:
    try:
        return json.loads(_read(path) or "null")
    except json.JSONDecodeError:
        return None
