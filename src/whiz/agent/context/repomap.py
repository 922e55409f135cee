"""A compact map of the repository for the model: every file, and the definitions in the important ones.

Definitions (classes, functions, methods, types) come from tree-sitter grammars. Files rank by how often
other files mention the names they define; the map shows definitions for as many top files as fit the
token budget, then paths only, then as many paths as fit.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.project.workspace import Workspace

LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".cs": "csharp",
    ".kt": "kotlin",
    ".php": "php",
}
# Node types that define something worth listing, across the grammars above.
DEFINITIONS = frozenset(
    {
        "function_definition",
        "class_definition",
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "type_alias_declaration",
        "method_definition",
        "method_declaration",
        "constructor_declaration",
        "record_declaration",
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "trait_item",
        "impl_item",
        "type_spec",
        "class",
        "module",
        "method",
        "singleton_method",
        "struct_specifier",
    }
)
# Definitions whose members (methods) are listed under them.
CONTAINERS = frozenset(
    {
        "class_definition",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "impl_item",
        "trait_item",
        "class",
        "module",
    }
)
# Nodes that only wrap definitions: looked through.
WRAPPERS = frozenset({"export_statement", "decorated_definition", "type_declaration", "template_declaration"})
PARSE_MAX_BYTES = 256_000
SIGNATURE_MAX_CHARS = 100


def len_based_estimate(text: str) -> int:
    """About four characters per token: close enough for code, and needs no tokenizer."""
    return (len(text) + 3) // 4


@dataclass
class FileOutline:
    """One file of the map: its path, its definition lines (indented by nesting) and its rank score."""

    path: str
    definitions: list[str] = field(default_factory=list)
    score: int = 0


def repo_map(
    ws: Workspace, budget_tokens: int = 1024, count_tokens: Callable[[str], int] = len_based_estimate
) -> str:
    """The map of `ws` fitted under `budget_tokens` (as `count_tokens` counts them)."""
    outlines = outline_files(ws)
    ranked = sorted(outlines, key=lambda o: (-o.score, o.path.count("/"), o.path))

    def fits(text: str) -> bool:
        return count_tokens(text) <= budget_tokens

    detailed = _largest(len(ranked), lambda k: fits(_render(ranked, k, len(ranked))))
    if detailed is not None:
        return _render(ranked, detailed, len(ranked))
    shown = _largest(len(ranked), lambda n: fits(_render(ranked, 0, n)))
    return "" if shown is None else _render(ranked, 0, shown)


def outline_files(ws: Workspace, limit: int = 5000) -> list[FileOutline]:
    """Every listed file with its definitions (where a grammar knows its language) and its rank score."""
    parsers: dict[str, Any] = {}
    outlines, words = [], []
    for rel in ws.list_files(limit=limit):
        # A secret-looking file is listed by name only: its definitions could quote its values.
        text = None if ws.is_secret(rel) else _read(ws, rel)
        outline = FileOutline(rel)
        names: set[str] = set()
        language = language_of(rel)
        if text is not None and language is not None:
            outline.definitions, names = _definitions(text, language, parsers)
        outlines.append((outline, names))
        words.append(set(re.findall(r"[A-Za-z_]\w+", text or "")))
    # How many other files mention a file's names: a cheap stand-in for "how central is this file".
    mentions = Counter(word for found in words for word in found)
    for (outline, names), own in zip(outlines, words, strict=True):
        outline.score = sum(mentions[name] - (name in own) for name in names)
    return [outline for outline, _ in outlines]


def _read(ws: Workspace, rel: str) -> str | None:
    path = ws.root / rel
    try:
        if path.stat().st_size > PARSE_MAX_BYTES:
            return None
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def language_of(path: str) -> str | None:
    """The tree-sitter language of a file, by its extension; None where no grammar is listed."""
    return LANGUAGES.get("." + path.rsplit(".", 1)[-1].lower()) if "." in path else None


def parser_for(language: str, parsers: dict[str, Any] | None = None) -> Any | None:
    """A tree-sitter parser for `language` (cached in `parsers`); None where the grammar is unavailable."""
    parsers = {} if parsers is None else parsers
    if language not in parsers:
        try:
            from tree_sitter_language_pack import get_parser

            parsers[language] = get_parser(language)
        except Exception:  # a missing or broken grammar only costs what needed it
            parsers[language] = None
    return parsers[language]


def _definitions(text: str, language: str, parsers: dict[str, Any]) -> tuple[list[str], set[str]]:
    """Definition lines of `text` and the names they define; nothing where the grammar is unavailable."""
    parser = parser_for(language, parsers)
    if parser is None:
        return [], set()
    source = text.encode("utf-8")
    lines: list[str] = []
    names: set[str] = set()
    _walk(parser.parse(source).root_node, source, 0, lines, names)
    return lines, names


def _walk(node: Any, source: bytes, depth: int, lines: list[str], names: set[str]) -> None:
    for child in node.named_children:
        if child.type in WRAPPERS:
            _walk(child, source, depth, lines, names)
        elif child.type in DEFINITIONS:
            lines.append("  " * depth + _signature(child, source))
            name = child.child_by_field_name("name")
            if name is not None:
                names.add(source[name.start_byte : name.end_byte].decode("utf-8", errors="replace"))
            body = child.child_by_field_name("body")
            if depth == 0 and child.type in CONTAINERS and body is not None:
                _walk(body, source, depth + 1, lines, names)


def _signature(node: Any, source: bytes) -> str:
    """The definition's head (its text up to the body, comments left out) on one line, shortened."""
    body = node.child_by_field_name("body")
    if body is None:
        head = source[node.start_byte : node.end_byte].decode("utf-8", errors="replace").split("\n", 1)[0]
    else:
        end = node.start_byte
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if child.type != "comment":
                end = child.end_byte
        head = source[node.start_byte : end].decode("utf-8", errors="replace")
    head = " ".join(head.split()).rstrip("{ ")
    head = re.sub(r"\s+([)\]])", r"\1", re.sub(r"([(\[])\s+", r"\1", head))
    return head if len(head) <= SIGNATURE_MAX_CHARS else head[: SIGNATURE_MAX_CHARS - 3] + "..."


def _render(ranked: list[FileOutline], detailed: int, shown: int) -> str:
    """The map text: the top `shown` files (in path order), the top `detailed` of them with definitions."""
    with_defs = {o.path for o in ranked[:detailed]}
    out = []
    for outline in sorted(ranked[:shown], key=lambda o: o.path):
        if outline.path in with_defs and outline.definitions:
            out.append(outline.path + ":")
            out.extend("  " + line for line in outline.definitions)
        else:
            out.append(outline.path)
    if shown < len(ranked):
        out.append(f"... and {len(ranked) - shown} more files")
    return "\n".join(out) + "\n" if out else ""


def _largest(n: int, ok: Callable[[int], bool]) -> int | None:
    """The largest k in 0..n with ok(k), for ok true up to some k and false after; None if ok(0) is false."""
    if not ok(0):
        return None
    low, high = 0, n
    while low < high:
        mid = (low + high + 1) // 2
        if ok(mid):
            low = mid
        else:
            high = mid - 1
    return low
