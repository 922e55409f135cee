"""The shape of the code: data flows one way, cli -> (server | agent) -> engine -> llama.cpp.

Every import in src/whiz goes from a higher layer to a lower one (or within one), and no modules
import each other in a loop, except loops that exist only for type hints (`if TYPE_CHECKING:`).
An import inside a function counts: it still runs.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS = {
    # the seams, the error hierarchy and the settings every part reads
    "whiz": 0,
    "whiz.errors": 0,
    "whiz.seams": 0,
    "whiz.config": 0,
    # below the model API: models on disk, the chat format, the engine over llama.cpp
    "whiz.models": 1,
    "whiz.chat": 1,
    "whiz.engine": 1,
    # message-level backends, the client the agent and the bench share, where commands run
    "whiz.backend": 2,
    "whiz.completion": 2,
    "whiz.client": 2,
    "whiz.environments": 2,
    "whiz.gateway": 3,
    # the model API
    "whiz.server": 4,
    # the agent, then what runs around it
    "whiz.agent": 5,
    "whiz.mcp": 6,  # the agent's MCP tools: behind its `external` seam, started by a session
    "whiz.modes": 6,
    # front-ends
    "whiz.web": 7,
    "whiz.tui": 7,
    "whiz.bench": 7,
    "whiz.setup": 7,
    "whiz.commands": 7,
    "whiz.acp": 7,
    "whiz.cli": 8,
    "whiz.__main__": 8,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    """The layer of a module: that of the longest prefix the table names."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise AssertionError(f"{module} is in no layer; add its package to LAYERS")


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports(modules: dict[str, Path], *, type_hints: bool = False) -> dict[str, set[str]]:
    """Each module's imports of other whiz modules, left out those under `if TYPE_CHECKING:`
    (kept with `type_hints`)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if not type_hints and _type_checking_only(node, parents):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # `from whiz.agent import loop` imports the module whiz.agent.loop
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            found |= {t for t in targets if t.split(".")[0] == "whiz" and t != name}
        graph[name] = {t if t in modules else t.rpartition(".")[0] for t in found} - {name}
    return graph


def whiz_modules() -> dict[str, Path]:
    return {module_name(p): p for p in (SRC / "whiz").rglob("*.py")}


@functools.cache
def whiz_graph() -> dict[str, set[str]]:
    """The import graph of the package, parsed once for the tests that read it (seconds each)."""
    return imports(whiz_modules())


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = sorted(
        f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
        for name, targets in whiz_graph().items()
        for target in targets
        if layer(target) > layer(name)
    )
    assert upward == []


def loops_in(graph: dict[str, set[str]]) -> list[str]:
    """Each loop of `graph` found by a depth-first walk, as `a -> b -> a`."""
    loops = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                loops.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return loops


def test_no_import_loops() -> None:
    assert loops_in(whiz_graph()) == []


TYPE_HINT_LOOPS = {
    # Being untied on another branch (the healing plan is rebuilt there).
    frozenset({"whiz.modes.heal_plan", "whiz.modes.healing"}),
}
"""Loops through type hints still to untie, each as the modules in it."""


def test_no_two_modules_need_each_other_even_for_type_hints() -> None:
    # A module that names another's type under TYPE_CHECKING still needs it to be read: data
    # flows one way, and a lower module that needs a higher one's object gets a Protocol
    # (whiz.seams, or its own) or the shared type moved down.
    loops = {frozenset(loop.split(" -> ")) for loop in loops_in(imports(whiz_modules(), type_hints=True))}
    assert loops - TYPE_HINT_LOOPS == set()


def test_the_type_hint_walk_sees_imports_under_type_checking(tmp_path) -> None:
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import whiz.b\n")
    (tmp_path / "b.py").write_text("import whiz.a\n")
    modules = {"whiz.a": tmp_path / "a.py", "whiz.b": tmp_path / "b.py"}
    assert loops_in(imports(modules)) == []
    assert loops_in(imports(modules, type_hints=True)) == ["whiz.a -> whiz.b -> whiz.a"]


def rooms(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The imports between the rooms of `package`: each sub-package is one room, and each module
    directly in it one of its own; what lies outside the package is left out."""

    def room(module: str) -> str | None:
        parts = module.split(".")
        depth = len(package.split(".")) + 1
        return ".".join(parts[:depth]) if module.startswith(package + ".") else None

    found: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if (here := room(name)) is not None:
            found.setdefault(here, set()).update(r for t in targets if (r := room(t)) not in (None, here))
    return found


def test_the_agents_rooms_import_one_way() -> None:
    # agent/'s sub-packages (context, editing, models, store, project) stand one above another:
    # a room that imports a room above it ties the two into one concern (docs/architecture.md).
    assert loops_in(rooms(whiz_graph(), "whiz.agent")) == []


def test_the_room_check_can_tell_a_loop() -> None:
    # No two modules import each other, yet the rooms of editing and store do.
    graph = {
        "whiz.agent.editing.edits": {"whiz.agent.store.journal", "whiz.errors"},
        "whiz.agent.store.journal": {"whiz.agent.store.sessions"},
        "whiz.agent.store.sessions": {"whiz.agent.editing.matching"},
        "whiz.agent.editing.matching": set(),
    }
    assert loops_in(graph) == []
    assert loops_in(rooms(graph, "whiz.agent")) == [
        "whiz.agent.editing -> whiz.agent.store -> whiz.agent.editing"
    ]


def loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.split()


def test_the_model_server_loads_no_agent_module() -> None:
    loaded = loaded_after("import whiz.server.app")
    agent = (["whiz", "agent"], ["whiz", "modes"], ["whiz", "mcp"])
    assert [m for m in loaded if m.split(".")[:2] in agent or m.split(".")[0] == "mcp"] == []


def test_an_engine_only_replica_loads_no_agent_module() -> None:
    # What `whiz serve --engine-only` runs: the serve command, over the model API alone.
    loaded = loaded_after(
        "from whiz.commands.serve import build_app; from whiz.config import ServeSettings; "
        "from whiz.engine.fake import fake_engine; "
        "build_app(fake_engine(lambda c: 'x'), ServeSettings(model='fake', engine_only=True))"
    )
    assert [
        m for m in loaded if m.split(".")[:2] in (["whiz", "agent"], ["whiz", "modes"], ["whiz", "tui"])
    ] == []


def test_the_table_can_tell_a_violation() -> None:
    # The walk sees an upward import (so the first test can fail).
    assert layer("whiz.server.app") < layer("whiz.agent.loop")
    assert "whiz.web.app" in whiz_graph()["whiz.commands.serve"]


# -- git ---------------------------------------------------------------------------------------------

GIT_RUNNER = "whiz.environments.git"
"""The one module that starts git, with its repository named and its programs pinned: git run
anywhere else would find its own repository (a folder the model wrote can be one) and run what
that repository's config names."""

PROCESS_CALLS = frozenset(
    {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
    | {"create_subprocess_exec", "create_subprocess_shell", "system", "popen", "posix_spawn", "posix_spawnp"}
    | {f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    | {f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
)
SHELL_GIT = re.compile(r"^\s*(\S*/)?git(\s|$)")


def starts_git(source: str) -> list[int]:
    """The lines of `source` that start git or name its program: the string "git" itself (as an
    argv's first item, for `shutil.which`, or kept in a variable for later), and a shell command
    line that begins with git, given to anything that starts a process."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        named = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if named and node.value.strip().rsplit("/", 1)[-1] == "git":
            found.add(node.lineno)
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in PROCESS_CALLS:
                for inner in ast.walk(node):
                    text = inner.values[0] if isinstance(inner, ast.JoinedStr) and inner.values else inner
                    if (
                        isinstance(text, ast.Constant)
                        and isinstance(text.value, str)
                        and SHELL_GIT.match(text.value)
                    ):
                        found.add(node.lineno)
    return sorted(found)


def test_only_the_git_module_starts_git() -> None:
    starting = [
        f"{name}:{line}"
        for name, path in sorted(whiz_modules().items())
        if name != GIT_RUNNER
        for line in starts_git(path.read_text())
    ]
    assert starting == []


def test_the_git_scan_can_tell_a_violation() -> None:
    caught = [
        'subprocess.run(["git", "ls-files"], cwd=base)',
        'cmd = ["/usr/bin/git"] + args\nsubprocess.Popen(cmd)',
        'await asyncio.create_subprocess_exec("git", "status")',
        'os.system("git status")',
        'subprocess.run(f"git diff {ref}", shell=True)',
        'subprocess.check_output(["sh", "-c", "git worktree add x"])',
        'shutil.which("git")',
    ]
    assert [snippet for snippet in caught if not starts_git(snippet)] == []
    passed = ['"""Asks `git ls-files` which files are tracked."""', 'kind = "git-worktree"', 'run(["gitk"])']
    assert [snippet for snippet in passed if starts_git(snippet)] == []


MODE_NAMES = {"fast", "deep", "auto"}
"""The modes (and the two models' labels) by name: `whiz.modes.registry` is where they are
spelled, as `Mode` and `Label`."""


def mode_name_comparisons(source: str) -> list[str]:
    """The comparisons in `source` that test a value against a mode's name as a string
    (`mode == "auto"`, `label != "deep"`, `mode in ("fast", "auto")`), each as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            strings = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
            if any(isinstance(s, ast.Constant) and s.value in MODE_NAMES for s in strings):
                found.append(ast.unparse(node))
                break
    return found


def test_no_mode_is_compared_to_a_string_outside_the_registry() -> None:
    # A mode is an object: code asks it what it does (`mode.first`, `mode.escalates(trigger)`)
    # instead of comparing its name in five files. Below the modes' layer the same words mean
    # other things (a Responses request's `truncation: "auto"`), and no mode is seen there.
    found = [
        f"{path.relative_to(SRC)}: {text}"
        for name, path in sorted(whiz_modules().items())
        if layer(name) >= layer("whiz.modes") and name != "whiz.modes.registry"
        for text in mode_name_comparisons(path.read_text())
    ]
    assert found == []


def test_the_mode_check_can_tell_a_comparison() -> None:
    code = """
if mode == "auto" or router.mode != "deep": pass
if label in ("fast", "other") or "deep" == which: pass
if mode is Mode.AUTO or label == Label.DEEP or truncation == "disabled": pass
"""
    assert mode_name_comparisons(code) == [
        "mode == 'auto'",
        "router.mode != 'deep'",
        "label in ('fast', 'other')",
        "'deep' == which",
    ]


def test_the_agent_loop_stays_a_loop() -> None:
    # The loop asks, parses, acts, observes and stops; a policy for a weak model is a named piece
    # it calls (`agent/retries.py`, `agent/control.py`), not another branch woven into it.
    lines = len((SRC / "whiz" / "agent" / "loop.py").read_text().splitlines())
    assert lines < 400, f"agent/loop.py has {lines} lines: move a policy out of the loop"
