"""Print whiz's Python dependencies and its test extra, one a line, all but llama-cpp-python.

`make` installs these while llama-cpp-python's wheel is built for this CPU (scripts/ensure_llama.sh),
so that the model can download meanwhile: `whiz models pull` does not load llama.cpp.
"""

import re
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
    if re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower() != "llama-cpp-python":
        print(requirement)
