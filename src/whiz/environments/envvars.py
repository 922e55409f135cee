"""The environment variables a confined command sees.

The rule, in one place: a variable passes when its name is in `ALLOWED` or starts with one of
`ALLOWED_PREFIXES` (what tools need to find programs, speak the locale and find a virtualenv), and
it does not look like a secret (`SECRET_PATTERNS`, which win over the allow-list). Everything else
(API keys, tokens, cloud credentials, the SSH agent) stays out, so a model-written command cannot
read them or send them anywhere.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

ALLOWED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ",
        "NO_COLOR", "FORCE_COLOR", "CI", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
        "JAVA_HOME", "GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "NODE_PATH",
    }
)  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "PYTHON")
# fnmatch patterns on the upper-cased name.
SECRET_PATTERNS = (
    "*_API_KEY", "*_KEY", "*_TOKEN", "*_SECRET", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*",
    "AWS_*", "HF_*", "OPENAI_*", "ANTHROPIC_*", "WHIZ_*", "GITHUB_*", "SSH_AUTH_SOCK",
)  # fmt: skip


def looks_secret(name: str) -> bool:
    """True for a name that usually holds a credential."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def confined_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of `environ` a confined command may see (see the module's rule)."""
    return {
        name: value
        for name, value in environ.items()
        if (name in ALLOWED or name.startswith(ALLOWED_PREFIXES)) and not looks_secret(name)
    }
