"""The documents and the code's own words stay true to the code.

Every `something.py` or `.md` file and every dotted `whiz.x.y` that a docstring or comment under
src/, the README, BENCHMARKS.md or a page of docs/ names must exist; every relative link in those
documents must resolve (its #anchor too); the README stays a short guide; docstrings and comments
never name the benchmark task or the dated run that taught them; and the generated pages match
the code.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOCS = ROOT / "docs"

EXPECTED_TO_LAND: set[str] = set()
"""Pages another branch is writing, expected to land with its merge: until a page exists, links
and mentions of it pass; once it exists it is checked like any other (its anchors too). Empty
once the branches have landed."""

EXAMPLE_FILES = {
    # Files of a user's project that prose uses as examples, not files of this repository.
    "AGENTS.md",
    "CLAUDE.md",
    "app.py",
    "calc.py",
    "credentials.py",
    "fizzbuzz.py",
    "greet.py",
    "id_utils.py",
    "shapes.py",
    "snake.py",
    "src/app.py",
    "stats.py",
    "test_stats.py",
    "tests/test_stats.py",
    "test_x.py",
    "wc.py",
    "x.py",
}

WIRE_NAMES = {
    # Fields of the `whiz` object on the wire (docs/protocol.md), written as dotted names.
    "whiz.grammar",
    "whiz.ignored_tools",
    "whiz.prediction",
    "whiz.timeline",
    "whiz.tool_grammar",
    "whiz.ttft_ms",
}

FILE_NAME = re.compile(r"(?<![\w*/.<>-])((?:[\w.-]+/)*[A-Za-z_][\w-]*\.(?:py|md))\b")
DOTTED = re.compile(r"(?<![\w.$/-])whiz(?:\.[A-Za-z_]\w*)+")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
TASK_OR_RUN = re.compile(r"\b(?:EditEval|HumanEval)[ /#]?\d+|\b20\d\d-\d\d-\d\d\b")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted(DOCS.glob("*.md"))]


def source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def code_words(path: Path) -> list[tuple[int, str]]:
    """A module's docstrings (and other bare strings, the attribute docstrings) and comments."""
    text = path.read_text()
    out = [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


@cache
def repo_files() -> tuple[str, ...]:
    top = [p for p in ROOT.glob("*.md")]
    inside = [p for folder in ("src", "tests", "scripts", "docs") for p in (ROOT / folder).rglob("*.*")]
    return tuple(str(p.relative_to(ROOT)) for p in top + inside if "__pycache__" not in p.parts) + tuple(
        sorted(EXPECTED_TO_LAND)
    )


def file_exists(name: str) -> bool:
    name = re.sub(r"^(?:\.+/)+", "", name)  # `./x.py`, `.../pkg/x.py`: the tail is what must exist
    if name in EXAMPLE_FILES or name.startswith("path/to/"):
        return True
    return any(f == name or f.endswith("/" + name) for f in repo_files())


@cache
def top_level_names(module: Path) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    return names


def class_names(node: ast.ClassDef) -> set[str]:
    found = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(item.name)
        elif isinstance(item, ast.Assign):
            found.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found.add(item.target.id)
    return found


def dotted_exists(name: str) -> bool:
    """`whiz.a.b.C.m`: the longest prefix that is a module, then a name it defines, then (for a
    class) one of its attributes."""
    if name in WIRE_NAMES:
        return True
    parts = name.split(".")
    module = None
    rest: list[str] = []
    for i in range(len(parts), 0, -1):
        base = SRC.joinpath(*parts[:i])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                module, rest = candidate, parts[i:]
                break
        if module:
            break
    if module is None:
        return False
    if not rest:
        return True
    defined = top_level_names(module)
    if rest[0] not in defined:
        return False
    node = defined[rest[0]]
    if len(rest) > 1 and isinstance(node, ast.ClassDef):
        return rest[1] in class_names(node)
    return True


def stale_names(text: str) -> list[str]:
    stale = [m.group(1) for m in FILE_NAME.finditer(text) if not file_exists(m.group(1))]
    stale += [m.group(0) for m in DOTTED.finditer(text) if not dotted_exists(m.group(0))]
    return stale


def test_names_in_docstrings_and_comments_exist():
    stale = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in source_files()
        for line, words in code_words(path)
        for name in stale_names(words)
    ]
    assert not stale, "docstrings and comments name what does not exist:\n" + "\n".join(stale)


def test_names_in_documents_exist():
    stale = [
        f"{doc.relative_to(ROOT)}: {name}" for doc in documents() for name in stale_names(doc.read_text())
    ]
    assert not stale, "documents name what does not exist:\n" + "\n".join(stale)


def test_the_checks_catch_a_stale_name():
    assert stale_names("see `runs.py`, PROTOCOL.md, `whiz.server.errors`, (`whiz.modes.healing.Nope`)") == [
        "runs.py",
        "PROTOCOL.md",
        "whiz.server.errors",
        "whiz.modes.healing.Nope",
    ]
    assert (
        stale_names("`engine/drafters.py`, docs/protocol.md, `whiz.modes.healing.Healer`, `whiz.config`")
        == []
    )


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    found: set[str] = set()
    in_fence = False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def broken_links(doc: Path) -> list[str]:
    broken = []
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in MD_LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (doc.parent / path_part).resolve() if path_part else doc
        where = str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest)
        if where in EXPECTED_TO_LAND and not dest.exists():
            continue
        if not dest.exists():
            broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    return broken


def test_relative_links_resolve():
    broken = [b for doc in documents() for b in broken_links(doc)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_a_short_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), (
        "no dated log in the README: figures go to BENCHMARKS.md"
    )
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text), "no commit hashes"
    for command in ("make run", "make test"):
        assert command in text


def test_code_does_not_name_the_task_or_run_that_taught_it():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {m.group(0)}"
        for path in source_files()
        if "bench" not in path.relative_to(SRC).parts
        for line, words in code_words(path)
        for m in TASK_OR_RUN.finditer(words)
    ]
    assert not found, "say why in terms of the code and the model, not which task or run:\n" + "\n".join(
        found
    )


@cache
def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/configuration.md", "docs/cli.md"])
def test_generated_pages_match_the_code(page):
    pages = gen_docs().render()
    assert (ROOT / page).read_text() == pages[page], f"{page} is out of date: run `make docs`"
