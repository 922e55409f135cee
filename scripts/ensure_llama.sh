#!/usr/bin/env bash
# Install llama-cpp-python into the venv from a wheel built once for this CPU and cached.
# The wheel is built from the PyPI source release with whiz's CMake flags (llama_cmake_args.py)
# and whiz's patch (llama_patch.py, with its C++ in llama_kernels/); all are part of the cache
# key, and the venv records the key it has, so changing any of them rebuilds.
# Usage: scripts/ensure_llama.sh VENV_PYTHON VERSION
set -euo pipefail
py="$1"; version="$2"
here="$(cd "$(dirname "$0")" && pwd)"
args="$(python3 "$here/llama_cmake_args.py")"
key="$( (printf '%s %s' "$version" "$args"; cat "$here/llama_patch.py" "$here"/llama_kernels/*) | sha256sum | cut -c1-12)"
prefix="$("$py" -c 'import sys; print(sys.prefix)')"
marker="$prefix/.whiz-llama-$key"
if [ -e "$marker" ] && "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$version')" 2>/dev/null; then
  exit 0
fi
cache="${WHIZ_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/whiz/wheels}/llama-$key"
wheel="$(ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  echo "Building llama-cpp-python $version for this CPU (once; a few minutes on 2 cores)..."
  echo "  CMAKE_ARGS=$args"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  "$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
  tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
  python3 "$here/llama_patch.py" "$work/llama_cpp_python-$version"
  mkdir -p "$cache"
  CMAKE_ARGS="$args" "$py" -m pip wheel --no-deps --no-cache-dir "$work/llama_cpp_python-$version" -w "$cache"
  wheel="$(ls "$cache"/llama_cpp_python-"$version"-*.whl | head -n1)"
fi
"$py" -m pip install --no-deps --force-reinstall "$wheel"
rm -f "$prefix"/.whiz-llama-*
touch "$marker"
# Its runtime dependencies (numpy, jinja2, diskcache, typing-extensions) come with the package install.
