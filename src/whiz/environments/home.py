"""What a confined command sees of the home folders: their toolchains, what the user allowed, nothing else.

A list of secret stores to hide is never complete: every new tool keeps its token somewhere new
(`~/.config/<tool>/hosts.yml`). So the sandbox does not mount the home folders at all: an empty
tmpfs covers `/home`, `/root`, `$HOME`, the user's home in the password database and every login
user's home. A command finds its home empty and writable (a cache or a log written there is gone
when the command ends), other users' homes and root's empty. Then what a build needs is mounted
again, read-only (`HomeView.toolchains`): interpreters, compilers and package caches at their usual
places (`TOOLCHAINS`), whiz's own Python, the PATH entries and the folders the toolchain variables
name (`VIRTUAL_ENV`, `RUSTUP_HOME`, ...), and the Python a workspace's virtualenv was made from.
What else a user's build needs is allowed by name (`SandboxOptions.allow`: `--sandbox-allow`, or
`[sandbox] allow` in the config file), read-only too. A link the command plants (`x -> ~/.config`)
leads into the empty folder: only what is mounted again can be reached through it.

The secret stores (`hidden.py`) stay hidden inside whatever is mounted again: a second lock, for a
user who allowed a whole folder.
"""

from __future__ import annotations

import glob
import os
import pwd
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from whiz.environments.dependencies import DEPENDENCY_DIRS, ENVIRONMENT_MARKERS
from whiz.environments.hidden import homes
from whiz.errors import did_you_mean

if TYPE_CHECKING:
    from whiz.config_file import ConfigFile

HOME_ROOTS = ("/home", "/root")
"""Where homes live: covered whether or not a user of this machine has one there."""

LOGIN_UID_MIN = 1000
"""Users from this id up are people (Debian's and Fedora's UID_MIN): their homes are covered too,
wherever they are. Below it are system accounts whose "home" is often a system folder."""

SYSTEM_FOLDERS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt", "/nix",
    "/opt", "/proc", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/var",
)  # fmt: skip
"""Never covered, nor a folder that holds one, even if an account names it as its home (a service's
home of `/var`): the command would lose its programs."""

TOOLCHAINS = (
    # Python: interpreters, user-site packages, the caches pip and uv install from, virtualenvs
    ".pyenv", ".local/share/uv/python", ".local/share/uv/tools", ".local/share/pipx", ".local/lib/python3*",
    ".cache/pip", ".cache/uv", ".cache/pypoetry/virtualenvs", ".local/share/virtualenvs", ".virtualenvs",
    "miniconda3", "anaconda3", "miniforge3", "mambaforge",
    # JavaScript: node versions and the package caches (not ~/.npmrc or ~/.yarnrc: tokens)
    ".nvm", ".volta", ".bun", ".deno", ".npm/_cacache", ".cache/yarn", ".yarn/berry/cache",
    ".local/share/pnpm",
    # Rust (not ~/.cargo itself: credentials.toml), Go, the JVM, version managers
    ".cargo/bin", ".cargo/registry", ".cargo/git/db", ".cargo/git/checkouts", ".rustup",
    "go/pkg/mod", "go/bin", "sdk",
    ".m2/repository", ".gradle/caches", ".gradle/wrapper", ".sdkman/candidates", ".rbenv",
    ".asdf/installs", ".local/share/mise/installs",
)  # fmt: skip
"""Relative to the command's own home folders: mounted again read-only where they exist. A cache is only read:
pip and npm install from what is there and do without the rest (the network is off by default)."""

TOOLCHAIN_VARIABLES: dict[str, tuple[str, ...]] = {
    "VIRTUAL_ENV": ("",), "CONDA_PREFIX": ("",), "PYENV_ROOT": ("",), "NVM_DIR": ("",),
    "RUSTUP_HOME": ("",), "CARGO_HOME": ("bin", "registry", "git/db", "git/checkouts"), "GOROOT": ("",),
    "GOPATH": ("bin", "pkg/mod"), "JAVA_HOME": ("",),
}  # fmt: skip
"""Variables of whiz's environment that name a toolchain's folder, with the parts of it to mount."""

NOBODY = 65534
"""Its home is `/nonexistent`; a home of its own would be a mistake, not a person's."""

CONFIG_TABLE = "sandbox"
CONFIG_KEYS = ("allow",)


class SandboxConfigError(ValueError):
    """The `[sandbox]` table of the config file is wrong: the message says where and how."""


@dataclass(frozen=True)
class HomeView:
    """The home folders a confined command finds empty, and what is mounted again inside them."""

    covered: tuple[Path, ...]
    """Each gets an empty tmpfs (outermost only), before the workspace is mounted."""
    toolchains: tuple[Path, ...]
    """Found under a covered folder (or the private /tmp, or a runtime folder): mounted read-only."""
    allowed: tuple[Path, ...]
    """Named by the user and there (real paths): mounted read-only."""
    missing: tuple[Path, ...] = ()
    """Named by the user but not there (or not readable): left out, and `whiz sandbox` says so."""
    links: tuple[tuple[Path, Path], ...] = ()
    """(real path, the path the user named) where a link stood between them inside a covered
    folder: the real folder is mounted at the name too, so tools find it where they look."""
    homes: tuple[Path, ...] = ()
    """The command's own home folders, made to exist (empty) so that tools can write there."""

    def mounts(self) -> list[str]:
        """The bwrap arguments: the empty folders, then what is mounted again."""
        args: list[str] = []
        for folder in self.covered:
            args += ["--tmpfs", str(folder)]
        for home in self.homes:
            if not any(home == c for c in self.covered):
                args += ["--dir", str(home)]
        for path in [*self.toolchains, *self.allowed]:
            args += ["--ro-bind", str(path), str(path)]
        for real, named in self.links:
            args += ["--ro-bind", str(real), str(named)]
        return args

    def bound(self) -> list[Path]:
        """Everything mounted again inside the covered folders."""
        return [*self.toolchains, *self.allowed, *(named for _, named in self.links)]

    def shows(self, path: Path, also: Iterable[Path] = ()) -> bool:
        """Whether a command can see `path`: outside every covered folder, or inside something
        mounted again (`also`: the workspace and other folders the sandbox mounts)."""
        if not any(path.is_relative_to(c) for c in self.covered):
            return True
        return any(path.is_relative_to(b) for b in [*self.bound(), *also])

    def may_mount(self, target: Path) -> bool:
        """Whether a linked dependency folder's target (`.venv -> ~/.virtualenvs/app`) may be
        mounted: anywhere a command sees already, or inside a covered folder only if it is an
        environment (a link planted to `~/.config` must not bring it back)."""
        return self.shows(target) or is_environment(target)

    def describe(self) -> list[str]:
        """What a confined command sees of the homes, in lines for people (`whiz sandbox`)."""
        lines = [f"home folders hidden (empty inside): {_listed(self.covered)}"]
        lines.append(f"read-only in them, toolchains: {_listed(self.toolchains)}")
        allowed = _listed(self.allowed, none="none (add one with --sandbox-allow PATH)")
        lines.append(f"read-only in them, allowed by you: {allowed}")
        if self.missing:
            lines.append(f"allowed but not found, or not readable: {_listed(self.missing)}")
        return lines


def home_view(
    environ: Mapping[str, str],
    euid: int,
    allow: Iterable[Path | str] = (),
    *,
    workspace_envs: Iterable[Path] = (),
    hidden_before: Sequence[str] = (),
    package: Path | None = None,
    prefixes: Sequence[str] = (),
) -> HomeView:
    """What to cover and mount again for a command of `euid` with `environ` (whiz's own).
    `allow`: the user's paths (`~` is `$HOME`). `workspace_envs`: the workspace's virtualenvs
    (their `pyvenv.cfg` names the Python they were made from). `hidden_before`: folders the
    sandbox covers anyway (the private /tmp), whose tools are mounted again as well. `package`,
    `prefixes`: whiz's own source and Python (`sys.prefix`, `sys.base_prefix`)."""
    covered = covered_homes(environ, euid)
    under = [*map(str, covered), *hidden_before]
    # The command's own homes (`$HOME`, its account's): often inside a covered folder (`/home`).
    own = [h for h in homes(environ, euid) if any(h.is_relative_to(c) for c in covered)]
    found: list[Path] = []
    for home in own:
        for name in TOOLCHAINS:
            found += [Path(p) for p in sorted(glob.glob(os.path.join(glob.escape(str(home)), name)))]
    for name, parts in TOOLCHAIN_VARIABLES.items():
        value = environ.get(name, "")
        if value and os.path.isabs(value):
            found += [Path(value) / part if part else Path(value) for part in parts]
    for entry in environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            found.append(Path(entry))
    found += [Path(p) for p in prefixes if p]
    if package is not None:
        found.append(package)
    for env in workspace_envs:
        found += _base_python(env)
    toolchains = [t for t in _inside(found, under) if reachable(t, euid)]
    allowed, missing, links = _allowed(allow, environ, under)
    missing += [p for p in allowed if not reachable(p, euid)]
    allowed = [p for p in allowed if reachable(p, euid)]
    links = [(real, named) for real, named in links if any(real.is_relative_to(a) for a in allowed)]
    return HomeView(
        tuple(covered),
        tuple(t for t in toolchains if t not in allowed),
        tuple(allowed),
        tuple(missing),
        tuple(links),
        tuple(own),
    )


def covered_homes(
    environ: Mapping[str, str], euid: int, accounts: Iterable[pwd.struct_passwd] | None = None
) -> list[Path]:
    """The home folders to cover, real paths, outermost only: `HOME_ROOTS`, `$HOME`, `euid`'s home,
    and the homes of the login users (`accounts`: default, the password database), wherever they
    are, but never `SYSTEM_FOLDERS` or a folder holding one."""
    candidates = [Path(p) for p in HOME_ROOTS]
    candidates += homes(environ, euid)
    for account in pwd.getpwall() if accounts is None else accounts:
        if (LOGIN_UID_MIN <= account.pw_uid != NOBODY) or account.pw_uid == euid:
            candidates.append(Path(account.pw_dir))
    found: list[Path] = []
    for path in candidates:
        if not path.is_absolute() or not path.is_dir():
            continue
        real = Path(os.path.realpath(path))
        if real == Path("/") or any(Path(s).is_relative_to(real) for s in SYSTEM_FOLDERS):
            continue
        if real not in found:
            found.append(real)
    return [p for p in found if not any(o != p and p.is_relative_to(o) for o in found)]


def is_environment(path: Path) -> bool:
    """A virtualenv, a conda environment, or a dependency folder by its name (`node_modules`)."""
    return path.name in DEPENDENCY_DIRS or any((path / m).exists() for m in ENVIRONMENT_MARKERS)


def allowed_in(file: ConfigFile) -> tuple[str, ...]:
    """The `allow` list of the config file's `[sandbox]` table (none if the file or the table is not
    there); SandboxConfigError naming the file and the key for a mistake."""
    path, table = file.path, file.table(CONFIG_TABLE)
    if not isinstance(table, dict):
        raise SandboxConfigError(f"{path}: [{CONFIG_TABLE}] must be a table")
    for key in table:
        if key not in CONFIG_KEYS:
            hint = did_you_mean(key, CONFIG_KEYS, or_list=True)
            raise SandboxConfigError(f"{path}: unknown key '{key}' in [{CONFIG_TABLE}]{hint}")
    allow = table.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(p, str) and p for p in allow):
        raise SandboxConfigError(
            f'{path}: [{CONFIG_TABLE}] allow must be a list of paths, e.g. ["~/.config/tool"]'
        )
    return tuple(allow)


def allow_list(file: ConfigFile, extra: Iterable[Path | str] = ()) -> tuple[Path, ...]:
    """What a confined command may see of the home: the config file's `[sandbox] allow`, then
    `extra` (the `--sandbox-allow` flags). Every front-end that confines a command reads it here, so
    the agent's commands and the web app's test command see the same home."""
    return tuple(Path(p) for p in [*allowed_in(file), *extra])


def reachable(path: Path, euid: int) -> bool:
    """Whether the user `euid` can read `path` (bubblewrap refuses to start over a path it
    cannot: a PATH entry in someone else's home). For another user than this process's (a test
    that builds root's sandbox for `nobody`), by the permission bits its owner and others have."""
    if euid == os.geteuid():
        return os.access(path, os.R_OK)
    try:
        for folder in path.parents:
            if not _may(os.stat(folder), euid, 0o1):
                return False
        return _may(os.stat(path), euid, 0o4)
    except OSError:
        return False


def _may(stat: os.stat_result, euid: int, bit: int) -> bool:
    return euid == 0 or bool(stat.st_mode & (bit << 6 if stat.st_uid == euid else bit))


def _inside(paths: Iterable[Path], folders: Sequence[str]) -> list[Path]:
    """The real paths of `paths` that exist strictly inside one of `folders`, outermost only."""
    found: list[Path] = []
    roots = [Path(f) for f in folders]
    for path in paths:
        real = Path(os.path.realpath(path))
        if real in found or real in roots or not real.exists():
            continue
        if any(real.is_relative_to(r) for r in roots):
            found.append(real)
    return [p for p in found if not any(o != p and p.is_relative_to(o) for o in found)]


def _allowed(
    allow: Iterable[Path | str], environ: Mapping[str, str], under: Sequence[str]
) -> tuple[list[Path], list[Path], list[tuple[Path, Path]]]:
    """The user's paths: those there (real paths; a covered folder itself may be named: then the
    whole of it is read-only inside), those not, and the links between a name and where it leads."""
    home = environ.get("HOME", "")
    allowed: list[Path] = []
    missing: list[Path] = []
    links: list[tuple[Path, Path]] = []
    for entry in allow:
        text = str(entry)
        if home and (text == "~" or text.startswith("~/")):
            text = home + text[1:]
        named = Path(os.path.abspath(text))
        if not os.path.exists(named):
            missing.append(named)
            continue
        real = Path(os.path.realpath(named))
        if real not in allowed:
            allowed.append(real)
        roots = [Path(f) for f in under]
        if real != named and any(named.is_relative_to(r) and named != r for r in roots):
            links.append((real, named))
    outer = [p for p in allowed if not any(o != p and p.is_relative_to(o) for o in allowed)]
    return outer, missing, links


def _base_python(env: Path) -> list[Path]:
    """The Python installation a virtualenv was made from (`home = .../bin` in its pyvenv.cfg),
    when it is one: a hostile repository writes that file, so only a folder with a `lib/python3*`
    beside the named `bin` holding a `python3` counts."""
    try:
        text = (env / "pyvenv.cfg").read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() == "home" and os.path.isabs(value.strip()):
            bin_dir = Path(os.path.realpath(value.strip()))
            prefix = bin_dir.parent
            if glob.glob(os.path.join(glob.escape(str(bin_dir)), "python3*")) and glob.glob(
                os.path.join(glob.escape(str(prefix)), "lib", "python3*")
            ):
                return [prefix]
    return []


def _listed(paths: Sequence[Path], none: str = "none") -> str:
    return ", ".join(map(str, paths)) if paths else none
