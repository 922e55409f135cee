"""Five small whole-program tasks for `whiz bench agent`, each judged by running the program headless.

The agent is told what to write and given a `--check` that runs the program ("it runs"); the judge
is stricter and is not shown to it: it runs the program (or imports it) on inputs and checks what
comes out, as a user trying it would.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProgramTask:
    """One task: what the agent is asked, the program's file, how it is run briefly (the agent's
    check), and the judge: a Python script that exits 0 when the program does what was asked."""

    task_id: str
    prompt: str
    filename: str
    run: str
    judge: str


PROGRAM_TASKS = [
    ProgramTask(
        "program/wc",
        "Write wc.py: a command-line tool that prints the number of lines, words and characters of "
        "the file named by its first argument, as three numbers separated by spaces.",
        "wc.py",
        "printf 'a b\\nc\\n' > /tmp/wc-sample.txt && python wc.py /tmp/wc-sample.txt",
        "import subprocess, sys, pathlib\n"
        "pathlib.Path('sample.txt').write_text('one two\\nthree\\nfour five six\\n')\n"
        "out = subprocess.run([sys.executable, 'wc.py', 'sample.txt'], capture_output=True, text=True,"
        " timeout=10).stdout.split()\n"
        "assert out[:3] == ['3', '6', '28'], out\n",
    ),
    ProgramTask(
        "program/guess",
        "Write guess.py: a number guessing game. It picks a secret number from 1 to 100 with "
        "random.randint, reads guesses from standard input one per line, prints 'too low', "
        "'too high' or 'correct' for each, and exits after a correct guess.",
        "guess.py",
        "seq 1 100 | python guess.py",
        "import subprocess, sys\n"
        "feed = ''.join(f'{n}\\n' for n in range(1, 101))\n"
        "p = subprocess.run([sys.executable, 'guess.py'], input=feed, capture_output=True, text=True,"
        " timeout=10)\n"
        "out = p.stdout.lower()\n"
        "assert 'correct' in out and p.returncode == 0, (p.returncode, out[-300:], p.stderr[-300:])\n"
        "assert 'too high' not in out.split('correct')[0], 'said too high before the secret'\n",
    ),
    ProgramTask(
        "program/web",
        "Write app.py with a web request handler: a function handle(path) that returns a tuple "
        "(status, body): (200, 'hello') for '/', (200, the sum as text) for '/add?a=2&b=3' and any "
        "other integers a and b, and (404, 'not found') for every other path.",
        "app.py",
        "python -c 'import app; print(app.handle(\"/\"))'",
        "import app\n"
        "assert app.handle('/') == (200, 'hello'), app.handle('/')\n"
        "assert app.handle('/add?a=2&b=3') == (200, '5'), app.handle('/add?a=2&b=3')\n"
        "assert app.handle('/add?a=10&b=-4') == (200, '6')\n"
        "assert app.handle('/nope') == (404, 'not found')\n",
    ),
    ProgramTask(
        "program/tictactoe",
        "Write tictactoe.py for a tic-tac-toe game: a function winner(board) where board is a list "
        "of 9 strings, each 'X', 'O' or ' ' (row by row), returning 'X' or 'O' for the player with "
        "three in a row (a row, a column or a diagonal), or None when nobody has.",
        "tictactoe.py",
        "python -c 'import tictactoe; print(tictactoe.winner([\" \"] * 9))'",
        "from tictactoe import winner\n"
        "assert winner(['X', 'X', 'X', ' ', 'O', 'O', ' ', ' ', ' ']) == 'X'\n"
        "assert winner(['O', 'X', ' ', 'O', 'X', ' ', 'O', ' ', 'X']) == 'O'\n"
        "assert winner(['X', 'O', ' ', 'O', 'X', ' ', ' ', ' ', 'X']) == 'X'\n"
        "assert winner([' ', ' ', 'O', ' ', 'O', ' ', 'O', 'X', 'X']) == 'O'\n"
        "assert winner(['X', 'O', 'X', 'X', 'O', 'O', 'O', 'X', 'X']) is None\n"
        "assert winner([' '] * 9) is None\n",
    ),
    ProgramTask(
        "program/fizzbuzz",
        "Write fizzbuzz.py: a program that prints the numbers from 1 to 30, one per line, but Fizz "
        "for multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both.",
        "fizzbuzz.py",
        "python fizzbuzz.py",
        "import subprocess, sys\n"
        "out = subprocess.run([sys.executable, 'fizzbuzz.py'], capture_output=True, text=True,"
        " timeout=10).stdout.split()\n"
        "want = ['FizzBuzz' if n % 15 == 0 else 'Fizz' if n % 3 == 0 else 'Buzz' if n % 5 == 0"
        " else str(n) for n in range(1, 31)]\n"
        "assert out == want, out\n",
    ),
]
