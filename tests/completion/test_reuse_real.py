"""Shifted-chunk reuse on the real model: a completion after lines deleted above the cursor is the
one a fresh prefill of the same prompt gives, while only a few of its tokens are prefilled."""

from __future__ import annotations

import httpx
import pytest

HEAD = "import os\nimport sys\n\n\n"
GONE = "".join(f"def helper{i}(path):\n    return os.path.join(path, '{i}')\n\n\n" for i in range(2))
GONE = "\n".join(GONE.split("\n")[:8]) + "\n"  # exactly one block of 8 lines, so the layout is the same
TAIL = (
    "def parse(argv):\n"
    '    """Return the flags and the file names in argv."""\n'
    "    flags = [a for a in argv if a.startswith('-')]\n"
    "    names = [a for a in argv if not a.startswith('-')]\n"
    "    return flags, names\n\n\n"
    "def main():\n"
    "    flags, names = parse(sys.argv[1:])\n"
    "    for name in names:\n"
    "        "
)
AFTER = "\n\n\nif __name__ == '__main__':\n    main()\n"


def infill(root: str, before: str, client: int) -> dict:
    body = {"input_prefix": before, "input_suffix": AFTER, "n_predict": 16, "id_slot": client}
    response = httpx.post(f"{root}/infill", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.model
def test_reuse_after_deleted_lines_gives_the_fresh_prefills_output(real_server):
    assert GONE.count("\n") == 8
    edited = HEAD + TAIL
    infill(real_server.root, HEAD + GONE + TAIL, 9102)
    reused = infill(real_server.root, edited, 9102)  # the same client, lines deleted above
    infill(real_server.root, "x = 1\n", 9102)  # its slot holds something else now: nothing to copy
    fresh = infill(real_server.root, edited, 9101)  # another client's slot: prefilled from the start
    assert reused["content"] == fresh["content"] and reused["content"].strip()
    assert reused["tokens_evaluated"] == fresh["tokens_evaluated"]  # the same prompt
    assert reused["timings"]["prompt_n"] <= 2 < 40 < fresh["timings"]["prompt_n"]
