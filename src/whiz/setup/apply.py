"""Writing a client's plan: each file that exists is backed up first, then replaced atomically; or,
for `--print`, only shown. Every file of a plan is read and merged before any is written, so a file
that does not parse leaves all of them as they were."""

from __future__ import annotations

import os
import time
from pathlib import Path

from whiz.setup.base import Change, ConfigError, Plan


def backup_path(path: Path, stamp: str | None = None) -> Path:
    """Where the old file goes: beside it, named by the time (`settings.json.whiz-backup-20261127-0512`)."""
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.whiz-backup-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.whiz-backup-{stamp}-{n}")
    return candidate


def write_plan(plan: Plan) -> list[tuple[Change, Path | None]]:
    """Write each file of `plan` (an unchanged one is left alone); returns each with its backup."""
    done = []
    for change in plan.changes:
        old = change.path.read_bytes() if change.path.exists() else None
        if old is not None and old == change.text.encode("utf-8"):
            done.append((change, None))
            continue
        backup = None
        try:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            if old is not None:
                backup = backup_path(change.path)
                backup.write_bytes(old)
                os.chmod(backup, change.path.stat().st_mode & 0o777)
            _write_atomic(change.path, change.text, secret=change.secret)
        except OSError as exc:
            raise ConfigError(f"cannot write {change.path}: {exc.strerror or exc}") from None
        done.append((change, backup))
    return done


def _write_atomic(path: Path, text: str, *, secret: bool) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    if secret:
        mode &= 0o600
    temporary = path.with_name(f".{path.name}.whiz-tmp")
    temporary.write_text(text, encoding="utf-8")
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def describe(plan: Plan, written: list[tuple[Change, Path | None]] | None) -> list[str]:
    """Lines for a person: each file, what was set in it, its backup; then how to start the client.
    `written` None: the plan was only shown (`--print`)."""
    lines = []
    for change, backup in written or [(c, None) for c in plan.changes]:
        verb = "would write" if written is None else ("updated" if change.existed else "wrote")
        if written is not None and backup is None and change.existed:
            verb = "already set up:"
        lines.append(f"{verb} {change.path}: {', '.join(change.settings)}")
        if backup is not None:
            lines.append(f"  the old file is at {backup}")
        if change.lost_comments:
            lines.append("  its comments are not kept in the new file (they are in the backup)")
    lines.append(f"start it with: {plan.run}")
    lines += plan.notes
    return lines
