"""A hostile model or repository cannot make whiz's own git run a program.

whiz runs git outside the sandbox, as the user. A folder holding `HEAD`, `config`, `objects/` and
`refs/` is a git folder to git (an "embedded bare repository"), and git runs the `core.fsmonitor`
its config names. Each test plants one and asks for what makes whiz run git; the program would
create MARKER, outside the workspace.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.agent.conftest import Harness, sr
from whiz.agent.approvals import Approvals
from whiz.agent.project.workspace import Workspace
from whiz.environments.worktree import isolated_copy

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def plain_git(root: Path, *args: str) -> None:
    """git as a user runs it: the tests' own, to build repositories."""
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def planted_bare_repository(marker: Path) -> dict[str, str]:
    """The files of a folder git takes for a repository whose work tree is its parent, and whose
    fsmonitor (run by `git ls-files` there) touches `marker`."""
    return {
        "HEAD": "ref: refs/heads/main\n",
        "config": (
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
            f'\tfsmonitor = "touch {marker}; :"\n'
        ),
        "objects/info/README": "objects\n",
        "refs/heads/README": "refs\n",
    }


def listed(harness: Harness, request: int) -> str:
    return harness.model.requests[request].items[-1]["content"]


async def test_a_bare_repository_the_model_writes_runs_nothing_when_it_lists_it(
    project: Path, tmp_path: Path
):
    marker = tmp_path / "MARKER"
    plant = [
        sr(f"evil/{name}", "", text.rstrip("\n")) for name, text in planted_bare_repository(marker).items()
    ]
    h = Harness(project, ["\n".join(plant) + "\nLIST evil\n", "Done."], tmp_path / "undo")
    await h.agent.run("Tidy up the project.")
    assert (project / "evil" / "config").is_file(), "the plant was written"
    assert not marker.exists(), "git ran the planted folder's fsmonitor"
    assert "evil/config" in listed(h, 1) and "evil/HEAD" in listed(h, 1)


async def test_a_bare_repository_a_clone_delivers_runs_nothing_in_a_read_only_session(
    project: Path, tmp_path: Path
):
    marker = tmp_path / "MARKER"
    for name, text in planted_bare_repository(marker).items():
        (project / "evil" / name).parent.mkdir(parents=True, exist_ok=True)
        (project / "evil" / name).write_text(text)
    plain_git(project, "init", "-q")
    plain_git(project, "add", "-A")
    plain_git(project, "commit", "-qm", "a hostile clone")
    h = Harness(project, ["LIST evil", "Done."], tmp_path / "undo", approvals=Approvals("read-only"))
    await h.agent.run("What is in evil?")
    assert not marker.exists(), "git ran the planted folder's fsmonitor"
    assert "evil/config" in listed(h, 1) and "evil/HEAD" in listed(h, 1)


def plant_repository(root: Path, marker: Path) -> None:
    """A `.git` such as a command run in the workspace could leave (`git init`, a commit, then its
    config and hooks): a fsmonitor, a post-checkout hook and a filter on every file, each of
    which touches `marker`."""
    plain_git(root, "init", "-q")
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "planted")
    touch = f"touch {marker}; :"
    plain_git(root, "config", "core.fsmonitor", touch)
    plain_git(root, "config", "filter.evil.smudge", f"{touch}; cat")
    plain_git(root, "config", "filter.evil.clean", f"{touch}; cat")
    plain_git(root, "config", "filter.evil.required", "true")
    plain_git(root, "config", "diff.evil.textconv", f"{touch}; cat")
    hook = root / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\n{touch}\n")
    hook.chmod(0o755)


async def test_a_repository_planted_in_a_plain_workspace_runs_nothing_on_the_next_list_or_copy(
    project: Path, tmp_path: Path
):
    marker = tmp_path / "MARKER"
    plant_repository(project, marker)
    (project / "greet.py").write_text("changed = True\n")  # a change the copy must carry
    h = Harness(project, ["LIST .", "Done."], tmp_path / "undo")
    await h.agent.run("What files are there?")
    assert "greet.py" in listed(h, 1)
    with isolated_copy(project) as copy:
        assert copy.kind == "git-worktree"
        assert copy.read_text("greet.py") == "changed = True\n"
    assert Workspace(project).list_files() == [".gitattributes", "README.md", "greet.py"]
    assert not marker.exists(), "whiz's git ran a program the repository's config names"


async def test_a_repository_a_confined_command_makes_runs_nothing_on_the_next_list_or_copy(
    project: Path, tmp_path: Path
):
    # The plant made in the sandbox, as a model's command would. Where the sandbox keeps `.git`
    # from being made, nothing is planted and nothing can run; where it lets the command through,
    # whiz's own git must still run none of it.
    marker = tmp_path / "MARKER"
    hook = ".git/hooks/post-checkout"
    hook = f"printf '#!/bin/sh\\ntouch {marker}\\n' > {hook}; chmod +x {hook}"
    plant = (
        f"RUN git init -q && git config core.fsmonitor 'touch {marker}; :' && {hook} && git add -A"
        " && git -c user.email=m@example.com -c user.name=m commit -qm planted"
    )
    h = Harness(project, [plant, "LIST .", "Done."], tmp_path / "undo", approval="full-auto")
    await h.agent.run("Set the project up.")
    assert "greet.py" in listed(h, 2)
    with isolated_copy(project) as copy:
        assert copy.read_text("greet.py") is not None
    assert not marker.exists(), "whiz's git ran a program a confined command planted"
