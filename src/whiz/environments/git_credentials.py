"""What a confined command sees of the workspace's git configuration: the same, without credentials.

A clone can keep a token in `.git/config`: a remote URL with a password
(`https://x-access-token:TOKEN@github.com/...`), or the `http.extraheader` with which CI checkouts
authenticate (GitHub's checkout action writes one). A command that reads it can pass the token to
the model in any encoding, so the sandbox binds a copy without them over the file (read-only, as
the rest of `.git`). Git inside still works: the network is off, and nothing local needs the token.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

_EXTRAHEADER = re.compile(r"^\s*extraheader\s*=.*$", re.IGNORECASE | re.MULTILINE)
_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s\"]+@", re.IGNORECASE)


def scrubbed(text: str) -> str:
    """`text` (a git config file) without `extraheader` lines and without the user and password
    part of every URL."""
    return _USERINFO.sub(r"\g<scheme>", _EXTRAHEADER.sub("", text))


def configs_with_credentials(root: Path) -> list[tuple[Path, str]]:
    """The git config files of the repository at `root` (its `.git` folder, or for a worktree the
    folders its `.git` file leads to) that hold credentials, each with its scrubbed text."""
    git = root / ".git"
    folders = [git]
    if git.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            line = git.read_text().strip()
            if line.startswith("gitdir:"):
                gitdir = (root / line.removeprefix("gitdir:").strip()).resolve()
                folders = [gitdir]
                with contextlib.suppress(OSError):
                    common = (gitdir / "commondir").read_text().strip()
                    if common:
                        folders.append((gitdir / common).resolve())
    found = []
    for folder in folders:
        config = folder / "config"
        try:
            if not config.is_file():
                continue
            text = config.read_text(errors="replace")
        except OSError:
            continue
        clean = scrubbed(text)
        if clean != text:
            found.append((config.resolve(), clean))
    return found
