"""The web app in a headless browser, for its end-to-end tests and the screenshots in docs/web.md.

Playwright's own browser download fails here, so this drives Debian's Chromium (`apt-get install
chromium`), launched quietly and offline. Playwright comes with the `test` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Playwright

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, where `make browser` installs it."""

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Headless, and nothing that reaches the network on its own (updates, sync, QUIC probes)."""


def launch_chromium(
    playwright: Playwright,
    profile_dir: Path,
    *,
    executable: Path = CHROMIUM,
    width_px: int = 1400,
    height_px: int = 900,
) -> BrowserContext:
    """Chromium with a fresh profile in `profile_dir` and a `width_px` x `height_px` viewport."""
    return playwright.chromium.launch_persistent_context(
        profile_dir,
        executable_path=executable,
        args=CHROMIUM_ARGS,
        headless=True,
        viewport={"width": width_px, "height": height_px},
    )
