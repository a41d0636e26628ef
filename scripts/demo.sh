#!/usr/bin/env bash
# The main job: builds kiln and continues a prompt with the default model embedded in the binary
# (a small llama trained by the project on the King James Bible, tools/train/).
# Extra arguments go to `kiln run`, e.g. scripts/demo.sh -m other.gguf -p "Once upon a time".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh release >/dev/null
if [[ $# -eq 0 ]]; then
  set -- -p "And God said unto Moses," -n 64 --temp 0.7 --seed 42
fi
exec build/release/kiln run "$@"
