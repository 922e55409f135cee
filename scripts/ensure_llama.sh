#!/usr/bin/env bash
# Install llama-cpp-python into the venv from a wheel built once for this CPU and cached.
# Usage: scripts/ensure_llama.sh VENV_PYTHON VERSION
set -euo pipefail
py="$1"; version="$2"
if "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$version')" 2>/dev/null; then
  exit 0
fi
args="$(python3 "$(dirname "$0")/llama_cmake_args.py")"
key="$(printf '%s %s' "$version" "$args" | sha256sum | cut -c1-12)"
cache="${WHIZ_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/whiz/wheels}/llama-$key"
wheel="$(ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  echo "Building llama-cpp-python $version for this CPU (once; about 4-8 minutes on 2 cores)..."
  echo "  CMAKE_ARGS=$args"
  mkdir -p "$cache"
  CMAKE_ARGS="$args" "$py" -m pip wheel --no-deps --no-cache-dir "llama-cpp-python==$version" -w "$cache"
  wheel="$(ls "$cache"/llama_cpp_python-"$version"-*.whl | head -n1)"
fi
"$py" -m pip install --no-deps "$wheel"
# Its runtime dependencies (numpy, jinja2, diskcache, typing-extensions) come with the package install.
