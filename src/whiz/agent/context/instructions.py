"""The project's own instructions for the model: `AGENTS.md` files (`CLAUDE.md` in a folder with no
`AGENTS.md`), from the repository's top down to the working folder, the nearest last.

The model is small, and every token of its system prompt is paid for on each cold start, so the
files share a budget (`AgentConfig.instructions_tokens`, about four characters a token). When they
are longer, each file gets an equal share (a short file keeps all of its text and leaves the rest
to the others) and is cut at a line break, with a line telling the model that it was cut; the user
is told too (the `project_instructions` item).

An instruction file is data the user wrote, but it is read like any other file the model sees: one
that looks like a secret (by the workspace's secret rules, `secret_files.py`), leads outside the
repository, holds a private key, is binary, unreadable or huge is not read, and the user gets a
warning saying why; the values of the workspace's secret files are masked in what is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whiz.agent.context.repomap import len_based_estimate
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.secret_files import SecretGate, holds_private_key
from whiz.agent.project.workspace import Workspace, is_git_name

NAMES = ("AGENTS.md", "CLAUDE.md")
"""The file names read in each folder, the first one found winning."""
INSTRUCTIONS_TOKENS = 1200
"""The default budget: a few short files, small beside the rules and the repository map."""
MAX_FILE_BYTES = 256_000
"""A larger file is not read at all: an instructions file that size is a generated or a wrong one."""
SEPARATOR = "\n\0\n"
"""Between the files' texts while they are masked together: no text read holds a NUL byte."""
HEADING = "The project's instructions, from its {names} (the nearest folder's last); follow them:"


@dataclass
class InstructionFile:
    """One file read: its path as shown (relative to the working folder, with a `../` for each
    folder above it), what of it the model is shown, and its size in tokens whole and as shown."""

    path: str
    text: str
    tokens: int
    shown_tokens: int

    @property
    def cut(self) -> bool:
        return self.shown_tokens < self.tokens


@dataclass
class ProjectInstructions:
    """The instruction files read for a session, in the order the model sees them (nearest last),
    and the warnings about those that were not read."""

    files: list[InstructionFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    budget_tokens: int = INSTRUCTIONS_TOKENS

    @property
    def cut(self) -> bool:
        return any(f.cut for f in self.files)

    def render(self) -> str:
        """The block of the system prompt that holds the files; empty when there are none."""
        if not self.files:
            return ""
        names = " and ".join(sorted({f.path.rsplit("/", 1)[-1] for f in self.files}))
        parts = [HEADING.format(names=names)]
        for f in self.files:
            parts.append(f"=== {f.path} ===\n{f.text.rstrip()}")
        return "\n\n".join(parts)

    def item(self) -> dict[str, Any]:
        """The `project_instructions` item's fields: what `--json` shows and the UI says."""
        return {
            "files": [
                {"path": f.path, "tokens": f.tokens, "shown_tokens": f.shown_tokens, "cut": f.cut}
                for f in self.files
            ],
            "budget_tokens": self.budget_tokens,
            "cut": self.cut,
            "warnings": list(self.warnings),
        }


def describe(item: dict[str, Any]) -> str:
    """One line for a person about a `project_instructions` item."""
    files = item.get("files") or []
    shown = ", ".join(f["path"] for f in files) or "none"
    line = f"instructions: {shown}"
    cut = [f["path"] for f in files if f.get("cut")]
    if cut:
        total = sum(f["tokens"] for f in files)
        line += (
            f" (about {total} tokens, cut to the {item.get('budget_tokens')}-token budget: "
            f"{', '.join(cut)}; --instructions-tokens raises it)"
        )
    for warning in item.get("warnings") or []:
        line += f"; {warning}"
    return line


def repository_top(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` holding a `.git` (a folder or a worktree's file);
    None outside any repository."""
    for candidate in [folder, *folder.parents]:
        if (candidate / ".git").exists():
            return candidate
    return None


def instruction_folders(root: Path) -> list[Path]:
    """The folders whose instruction files apply to work in `root`: from the repository's top down
    to `root` itself; outside a repository, `root` alone."""
    root = root.resolve()
    top = repository_top(root) or root
    folders = [root]
    while folders[-1] != top:
        folders.append(folders[-1].parent)
    return folders[::-1]


def read_instructions(ws: Workspace, budget_tokens: int = INSTRUCTIONS_TOKENS) -> ProjectInstructions:
    """The instruction files for a session in `ws`, fitted to `budget_tokens` (0: none are read)."""
    found = ProjectInstructions(budget_tokens=budget_tokens)
    if budget_tokens <= 0:
        return found
    reader = _Reader(ws, found.warnings)
    texts = [(path, text) for folder in instruction_folders(ws.root) for path, text in reader.read(folder)]
    if texts:  # the values of the workspace's secret files masked, the workspace listed once for all
        masked = SecretGate(ws).redact(SEPARATOR.join(text for _, text in texts)).split(SEPARATOR)
        texts = [(path, text) for (path, _), text in zip(texts, masked, strict=True)]
    sizes = [len_based_estimate(text) for _, text in texts]
    for (path, text), size, share in zip(texts, sizes, fair_shares(sizes, budget_tokens), strict=True):
        shown = text if share >= size else cut_to(text, share, path)
        found.files.append(InstructionFile(path, shown, size, min(size, share)))
    return found


def fair_shares(sizes: list[int], budget: int) -> list[int]:
    """Each size's share of `budget`: an equal share each, a size under its share keeping all it
    needs and leaving the rest to the larger ones."""
    shares = [0] * len(sizes)
    left, count = budget, len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        shares[i] = min(sizes[i], left // count)
        left -= shares[i]
        count -= 1
    return shares


def cut_to(text: str, tokens: int, path: str) -> str:
    """The start of `text` within `tokens` (about four characters each), ended at a line break
    where there is one, and a line saying that the rest was left out."""
    limit = max(tokens, 0) * 4
    head = text[:limit]
    if "\n" in head and len(text) > limit:
        head = head[: head.rindex("\n") + 1]
    left = len_based_estimate(text[len(head) :])
    note = f"[The rest of {path}, about {left} tokens, was cut to keep these instructions short.]"
    return head.rstrip() + "\n" + note


class _Reader:
    """Reads one folder's instruction file by the secret gate's rules, adding a warning for a file
    it will not read."""

    def __init__(self, ws: Workspace, warnings: list[str]):
        self.ws = ws
        self.warnings = warnings
        self.top = instruction_folders(ws.root)[0]
        self.seen: set[Path] = set()

    def read(self, folder: Path) -> list[tuple[str, str]]:
        for name in NAMES:
            path = folder / name
            if not (path.exists() or path.is_symlink()):
                continue
            shown = Path(*[".."] * len(self.ws.root.relative_to(folder).parts), name).as_posix()
            if path.resolve() in self.seen:  # a link to a file read already
                return []
            self.seen.add(path.resolve())
            text = self._text(path, shown)
            return [(shown, text)] if text and text.strip() else []
        return []

    def _text(self, path: Path, shown: str) -> str | None:
        try:
            real = self._checked(path, shown)
        except WhizAgentError as exc:
            self.warnings.append(f"{shown} not read: {exc.message}")
            return None
        try:
            if real.stat().st_size > MAX_FILE_BYTES:
                self.warnings.append(f"{shown} not read: it is over {MAX_FILE_BYTES // 1000} KB")
                return None
            data = real.read_bytes()
        except OSError as exc:
            self.warnings.append(f"{shown} not read: {exc.strerror or exc}")
            return None
        try:
            if b"\0" in data:
                raise UnicodeDecodeError("utf-8", data, 0, 1, "a NUL byte")
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.warnings.append(f"{shown} not read: it is not UTF-8 text")
            return None
        if holds_private_key(text):
            self.warnings.append(f"{shown} not read: it holds a private key")
            return None
        return text

    def _checked(self, path: Path, shown: str) -> Path:
        """The file's real path, where the secret rules let it be read; WhizAgentError saying why not."""
        if path.is_relative_to(self.ws.root):  # the workspace's own gate: escapes, .git, secrets
            rel = self.ws.relative(path)
            real = self.ws.resolve(rel)
            if self.ws.is_secret(rel):
                raise WhizAgentError("it looks like a secret file (docs/secrets.md)")
            return real
        real = path.resolve()
        if not real.is_relative_to(self.top):
            raise WhizAgentError("it is a link that leads outside the repository")
        rel = real.relative_to(self.top)
        if any(is_git_name(part) for part in rel.parts):
            raise WhizAgentError("it is a link into git's own folder")
        if self.ws.secrets.matches(path.relative_to(self.top).as_posix()) or self.ws.secrets.matches(
            rel.as_posix()
        ):
            raise WhizAgentError("it looks like a secret file (docs/secrets.md)")
        if not real.is_file():
            raise WhizAgentError("it is not a file")
        return real
