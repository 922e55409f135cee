"""A git config as a confined command sees it: without tokens (`git_credentials.scrubbed`)."""

from __future__ import annotations

from whiz.environments.git_credentials import scrubbed

CONFIG = """[remote "origin"]
\turl = https://x-access-token:ghs_TOKEN@github.com/o/r.git
\tpushurl = git@github.com:o/r.git
[http "https://github.com/"]
\textraheader = AUTHORIZATION: basic Z2hzX1RPS0VO
[url "https://user:pw@mirror.example/"]
\tinsteadOf = https://example/
"""


def test_tokens_go_and_everything_else_stays():
    clean = scrubbed(CONFIG)
    assert "ghs_TOKEN" not in clean and "Z2hzX1RPS0VO" not in clean and "pw@" not in clean
    assert "url = https://github.com/o/r.git" in clean
    assert "pushurl = git@github.com:o/r.git" in clean  # no password in an ssh address
    assert '[url "https://mirror.example/"]' in clean and '[http "https://github.com/"]' in clean
    assert scrubbed(clean) == clean
