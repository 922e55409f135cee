"""What a confined command does not see: the host's runtime folders and the home's secret stores.

The sandbox mounts an empty read-only tmpfs over each folder named here, and /dev/null over each
file, so a command finds them empty instead of reading credentials or reaching the sockets that
live there (the seccomp filter refuses new unix sockets as well; this is the second lock). The
homes themselves are hidden whole (`home.py`); the stores listed here matter where a command sees
into a home anyway: a toolchain folder, a path the user allowed, a home inside the workspace.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
from collections.abc import Iterable, Mapping
from pathlib import Path

# Per-boot and per-user runtime state: the systemd and D-Bus sockets, docker.sock, the ssh and gpg
# agents under /run/user/UID, container secrets (/run/secrets). /var/run is usually a link here.
RUNTIME_FOLDERS = ("/run", "/var/run")

# Relative to a home folder: where tools keep keys, tokens and passwords.
SECRET_STORES = (
    ".ssh", ".gnupg", ".password-store", ".local/share/keyrings", ".netrc", ".git-credentials",
    ".config/git/credentials", ".config/gh", ".config/hub", ".aws", ".azure", ".config/gcloud",
    ".kube", ".docker", ".oci", ".config/doctl", ".s3cfg", ".boto", ".terraform.d", ".vault-token",
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".gem/credentials", ".cargo/credentials",
    ".cargo/credentials.toml", ".m2/settings.xml", ".gradle/gradle.properties", ".pgpass", ".my.cnf",
    ".config/rclone", ".config/op", ".huggingface", ".cache/huggingface/token", ".config/openai",
    ".codex", ".claude", ".claude.json", ".local/share/whiz", ".mozilla", ".config/google-chrome",
    ".config/chromium", ".config/glab-cli", ".config/configstore", ".wrangler", ".config/.wrangler",
    ".config/ngrok", ".terraformrc", ".databrickscfg", ".snowsql", ".config/sops", ".bash_history",
    ".zsh_history", ".python_history", ".psql_history", ".mysql_history", ".node_repl_history",
)  # fmt: skip
# Outside any home: files only root may read. A confined command of root's is still root's user
# outside its namespace (without capabilities, but owner of these), so they are hidden too.
SYSTEM_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
)  # fmt: skip


def homes(environ: Mapping[str, str], euid: int) -> list[Path]:
    """The home folders whose secret stores are hidden: `$HOME` and the password database's home
    of `euid` (root's own when whiz runs as root with HOME pointing elsewhere, as in CI)."""
    found: list[Path] = []
    candidates = [environ.get("HOME", "")]
    with contextlib.suppress(KeyError):
        candidates.append(pwd.getpwuid(euid).pw_dir)
    for home in candidates:
        if home and os.path.isabs(home) and home != "/":
            real = Path(os.path.realpath(home))
            if real not in found:
                found.append(real)
    return found


def runtime_folders(environ: Mapping[str, str]) -> list[Path]:
    """The runtime folders that exist here, `$XDG_RUNTIME_DIR` included, real paths, outermost only."""
    named = [*RUNTIME_FOLDERS, environ.get("XDG_RUNTIME_DIR", "")]
    return _outermost(Path(os.path.realpath(p)) for p in named if p and os.path.isabs(p) and os.path.isdir(p))


# In whiz's own data folder (`$WHIZ_HOME`, else ~/.local/share/whiz, listed above): past sessions
# (the conversations, with whatever files they read), the edit journal and the undo snapshots (the
# texts files had before an edit: a `.env` the user let the model change, too).
WHIZ_STORES = ("sessions.db", "sessions.db-wal", "sessions.db-shm", "journal", "undo")


def secret_stores(home_folders: Iterable[Path], whiz_home: str = "") -> list[Path]:
    """The secret stores that exist under `home_folders`, `SYSTEM_SECRETS`, and whiz's own in
    `whiz_home`, as real paths (a store that is a link is hidden where it leads)."""
    found: list[Path] = []
    paths = [home / name for home in home_folders for name in SECRET_STORES]
    whiz_home = os.path.expanduser(whiz_home)
    if whiz_home and os.path.isabs(whiz_home):
        paths += [Path(whiz_home) / name for name in WHIZ_STORES]
    paths += [Path(p) for pattern in SYSTEM_SECRETS for p in sorted(glob.glob(pattern))]
    for path in paths:
        if os.path.lexists(path):
            real = Path(os.path.realpath(path))
            if real.exists() and real not in found:
                found.append(real)
    return _outermost(found)


def overlaps(path: Path, hidden: Iterable[Path]) -> bool:
    """True when `path` is inside a hidden folder or holds one: binding it would show it again."""
    return any(path.is_relative_to(h) or h.is_relative_to(path) for h in hidden)


def _outermost(paths: Iterable[Path]) -> list[Path]:
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(o != p and p.is_relative_to(o) for o in unique)]
