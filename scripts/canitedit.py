"""Fetch nuprl's CanItEdit and write it as a `whiz bench agent --suites canitedit` suite.

CanItEdit (Cassano et al., COLM 2024) is 105 hand-written Python programs, each with an
instruction to change it (descriptive and lazy wordings) and a hidden test suite: the test code
runs after the program, and the edit is right when the whole exits 0. Its tests are not derived
from HumanEval, so it checks what EditEval (InstructCoder's, HumanEval-based) cannot.

The data lives on Hugging Face (datasets/nuprl/CanItEdit, split "test"); this script reads its
rows through the Hugging Face datasets-server API with the standard library only, or from a copy
of the rows you have (`--from`: JSON Lines or a JSON list of rows with `before`, `tests`, ...), and
writes one task per line in the bench's format:

    {"task_id": "CanItEdit/<id>-<name>", "filename": "<name>.py", "instruction": ...,
     "input": <the program before>, "test": "def check():\\n    <the hidden tests>",
     "reference": <the program after>}

Licence: the dataset card says MIT; the GitHub repository (nuprl/CanItEdit) is under a BSD
3-clause licence with a machine-learning restriction (its contents may not be used to train a
model). Evaluating on it is allowed under both; to be safe this repository does not carry the
data, and the file written here is for your own evaluation, not for training.

    python scripts/canitedit.py                       # -> shared/bench/canitedit.jsonl
    python scripts/canitedit.py --instruction lazy --out /tmp/cie.jsonl
    python scripts/canitedit.py --from rows.jsonl     # a copy made where huggingface.co is reachable
    python scripts/canitedit.py --verify              # and check each reference passes its tests
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

DATASET = "nuprl/CanItEdit"
ROWS_URL = "https://datasets-server.huggingface.co/rows"
PAGE = 100


def default_out() -> Path:
    """`shared/bench/canitedit.jsonl` where the bench looks for it: in the `shared/bench` folder of
    the repository or a folder above it (beside EditEval's data), else the repository's own."""
    parents = Path(__file__).resolve().parents
    folder = next((p / "shared" / "bench" for p in parents[1:] if (p / "shared" / "bench").is_dir()), None)
    return (folder or parents[1] / "shared" / "bench") / "canitedit.jsonl"


def fetch_rows(dataset: str = DATASET, split: str = "test", timeout_s: float = 60.0) -> list[dict]:
    """Every row of the dataset's split, page by page, from the datasets-server API. A row the API
    cut short (`truncated_cells`, for a large page) is asked for again alone; ValueError if it is
    cut short even then."""
    rows: list[dict] = []
    while True:
        page = _rows_page(dataset, split, len(rows), PAGE, timeout_s)
        got = []
        for entry in page.get("rows", []):
            if entry.get("truncated_cells"):
                (entry,) = _rows_page(dataset, split, entry["row_idx"], 1, timeout_s)["rows"]
                if entry.get("truncated_cells"):
                    cut = entry["truncated_cells"]
                    raise ValueError(f"row {entry['row_idx']} comes back cut short: {cut}")
            got.append(entry["row"])
        rows += got
        if not got or len(rows) >= page.get("num_rows_total", len(rows)):
            return rows


def _rows_page(dataset: str, split: str, offset: int, length: int, timeout_s: float) -> dict:
    query = urllib.parse.urlencode(
        {"dataset": dataset, "config": "default", "split": split, "offset": offset, "length": length}
    )
    with urllib.request.urlopen(f"{ROWS_URL}?{query}", timeout=timeout_s) as response:
        return json.load(response)


def read_rows(path: Path) -> list[dict]:
    """Rows from a local copy: JSON Lines, or one JSON list (of rows, or of {"row": row})."""
    text = path.read_text()
    stripped = text.lstrip()
    rows = (
        json.loads(text)
        if stripped.startswith("[")
        else [json.loads(x) for x in text.splitlines() if x.strip()]
    )
    return [r["row"] if isinstance(r, dict) and "row" in r else r for r in rows]


def as_check(tests: str) -> str:
    """The hidden tests as the body of `check()`, which the bench calls after the program: indented,
    so that a failing assertion's traceback quotes its own line; run through `exec` where the tests
    cannot stand inside a function unchanged: a `global` or a `__future__` import, a multi-line
    string (indenting would change its text), a builtin redefined (`def print`: inside a function
    the name is local from the start, so a use before it fails)."""
    body = textwrap.indent(tests.rstrip() + "\n", "    ")
    check = f"def check():\n{body}" if body.strip() else "def check():\n    pass\n"
    try:
        inside = ast.parse(check).body[0].body
        alone = ast.parse(tests).body
        same = ast.dump(ast.Module(inside, [])) == ast.dump(ast.Module(alone, [])) or not alone
        if same and not re.search(r"^\s*(global|from __future__)\b", tests, re.M) and not _shadows(alone):
            return check
    except SyntaxError:
        pass
    return f"def check():\n    exec(compile({tests!r}, 'canitedit_tests', 'exec'), globals())\n"


def _shadows(body: list[ast.stmt]) -> bool:
    """Whether the tests bind a builtin's name anywhere (in an `if True:` block too)."""
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    names = {n.name for n in nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    names |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bool(names & set(dir(builtins)))


def convert(row: dict, instruction: str = "descriptive") -> dict:
    """One CanItEdit row as a bench task (see the module's docstring)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", str(row.get("name") or f"task{row['id']}")).strip("_").lower()
    return {
        "task_id": f"CanItEdit/{row['id']}-{name}",
        "filename": f"{name}.py",
        "instruction": row[f"instruction_{instruction}"].strip(),
        "input": row["before"],
        "test": as_check(row["tests"]),
        "reference": row.get("after"),
    }


def passes(code: str, test: str, timeout_s: float = 60.0) -> bool:
    """Whether `code` then `test`, then `check()`, exits 0 (run from a file in a scratch directory,
    as the bench runs it: tests that read their program's source through `inspect` need one)."""
    with tempfile.TemporaryDirectory(prefix="canitedit-") as cwd:
        (Path(cwd) / "check_program.py").write_text(f"{code}\n{test}\ncheck()\n")
        try:
            done = subprocess.run(
                [sys.executable, "check_program.py"],
                cwd=cwd, capture_output=True, timeout=timeout_s, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    out = default_out()
    parser.add_argument("--out", type=Path, default=out, help=f"where to write (default: {out})")
    parser.add_argument(
        "--from", dest="source", type=Path, help="read the rows from this file, not the network"
    )
    parser.add_argument("--instruction", choices=("descriptive", "lazy"), default="descriptive")
    parser.add_argument(
        "--verify", action="store_true", help="keep only tasks whose reference passes its tests"
    )
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.source) if args.source else fetch_rows()
    except (OSError, urllib.error.URLError, ValueError) as exc:
        where = args.source or f"{ROWS_URL} ({DATASET})"
        print(f"canitedit: could not read the rows from {where}: {exc}", file=sys.stderr)
        print(
            "canitedit: on a machine that reaches huggingface.co, run this script there (or save the "
            "dataset's rows as JSON Lines and pass --from FILE)",
            file=sys.stderr,
        )
        return 1
    try:
        tasks = [convert(row, args.instruction) for row in rows]
    except KeyError as exc:
        print(f"canitedit: a row has no {exc} field: not CanItEdit's rows", file=sys.stderr)
        return 1
    if args.verify:
        kept = [t for t in tasks if t["reference"] and passes(t["reference"], t["test"])]
        print(f"canitedit: {len(kept)} of {len(tasks)} references pass their tests", file=sys.stderr)
        tasks = kept
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    print(f"canitedit: wrote {len(tasks)} tasks to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
