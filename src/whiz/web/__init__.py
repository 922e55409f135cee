"""whiz web: the browser app that `whiz serve` serves at `/` (static files, plain ES modules).

The files under `static/` are the whole app; `vendor/` holds the third-party libraries it uses,
copied as released (see `static/vendor/README.md`). Nothing is built at install time.
"""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
"""Where the app's files live in the installed package."""
