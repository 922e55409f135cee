"""Dependency folders (a virtualenv, node_modules) that an isolated copy shares with its workspace.

A copy links them rather than copying them (they are big, and the tests need their packages), so
the link leads to the user's real environment. The sandbox mounts each link's target read-only:
a candidate's tests can import from it but not install into it or change it.
"""

from __future__ import annotations

import os
from pathlib import Path

# Linked instead of copied: large, only read by the tests.
DEPENDENCY_DIRS = frozenset({".venv", "venv", "node_modules", ".tox", ".nox"})


def shared_dependencies(folder: Path) -> list[Path]:
    """The real folders behind `folder`'s linked dependency folders (links leading outside it)."""
    folder = Path(folder).resolve()
    shared = []
    for name in sorted(DEPENDENCY_DIRS):
        link = folder / name
        if not link.is_symlink():
            continue
        target = link.resolve()
        # A link to the folder itself or to one of its parents would cover the whole workspace.
        if target.is_dir() and not folder.is_relative_to(target) and not target.is_relative_to(folder):
            shared.append(target)
    return shared


# Also read-only in the workspace itself: installed code that runs outside the sandbox the next time
# the user starts Python or node there (a `.pth` file in site-packages runs at every start).
WORKSPACE_DEPENDENCY_DIRS = DEPENDENCY_DIRS | {"__pypackages__", ".pixi", ".conda"}
# A folder holding one of these is an environment, whatever its name (`env/`, `.py311/`).
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")


def workspace_dependencies(folder: Path, prefixes: list[str]) -> list[Path]:
    """The dependency folders inside `folder` a command in its sandbox may not change: the known
    names and any environment (`ENVIRONMENT_MARKERS`) at its top level or one level down (a
    monorepo's `web/node_modules`), and each of `prefixes` (whiz's own `sys.prefix`, the active
    virtualenv) that lies inside it. Real paths, outermost only."""
    folder = Path(folder).resolve()
    found: list[Path] = []

    def consider(path: Path) -> None:
        real = path.resolve()
        if real.is_dir() and real != folder and real.is_relative_to(folder) and real not in found:
            found.append(real)

    def is_dependency(entry: Path) -> bool:
        return entry.name in WORKSPACE_DEPENDENCY_DIRS or any(
            (entry / marker).exists() for marker in ENVIRONMENT_MARKERS
        )

    for entry in _subfolders(folder):
        if is_dependency(entry):
            consider(entry)
        elif not entry.name.startswith("."):
            for inner in _subfolders(entry):
                if is_dependency(inner):
                    consider(inner)
    for prefix in prefixes:
        if prefix and Path(prefix).is_absolute():
            consider(Path(prefix))
    return [p for p in found if not any(o != p and p.is_relative_to(o) for o in found)]


def _subfolders(folder: Path) -> list[Path]:
    # scandir's file types need no stat per entry; a link to a folder counts (`.venv -> env`).
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in entries if e.is_dir()]
    except OSError:
        return []
