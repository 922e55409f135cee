"""Dependency folders (a virtualenv, node_modules) that an isolated copy shares with its workspace.

A copy links them rather than copying them (they are big, and the tests need their packages), so
the link leads to the user's real environment. The sandbox mounts each link's target read-only:
a candidate's tests can import from it but not install into it or change it.
"""

from __future__ import annotations

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
