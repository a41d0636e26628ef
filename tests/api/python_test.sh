#!/usr/bin/env bash
# The Python package as a user installs it: `pip install --no-build-isolation` (offline, Debian's
# setuptools; from a copy, so the source tree gets no build folders) into a folder of the build
# tree, then pytest (Debian's python3-pytest) over tests/api/python against libkiln.so.
# Usage: python_test.sh BUILD_DIR SOURCE_DIR KILN_BINARY FIXTURE_MODELS_DIR LIBKILN_SO
# KILN_PYTHON_PRELOAD: LD_PRELOAD for pytest only, not pip (scripts/sanitize.sh: the ASan and
# UBSan runtimes, which a sanitized libkiln.so needs and CPython does not bring).
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") kiln=$(realpath "$3") models=$(realpath "$4") lib=$(realpath "$5")
python=/usr/bin/python3  # Debian's: its pytest, jsonschema and setuptools (scripts/deps.sh test)
work="$build/api-python"
rm -rf "$work"
mkdir -p "$work"
cp -r "$src/bindings/python" "$work/package"
"$python" -m pip install --quiet --root-user-action=ignore --no-build-isolation --no-deps --no-index --target "$work/site" "$work/package"
export PYTHONPATH="$work/site" KILN_LIBRARY="$lib" KILN_BIN="$kiln" KILN_TEST_MODELS="$models"
export KILN_DEFAULT_MODEL="$src/models/kjv-llama-q8_0.gguf"
cd "$work"
[[ -n "${KILN_PYTHON_PRELOAD:-}" ]] && export LD_PRELOAD="$KILN_PYTHON_PRELOAD"
exec "$python" -m pytest -q -p no:cacheprovider "$src/tests/api/python"
