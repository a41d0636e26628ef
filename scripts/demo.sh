#!/usr/bin/env bash
# The main job: builds kiln and shows it at work on a model. Until text generation lands this
# inspects a fixture model; it will run the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh release
model=${1:-../shared/fixtures/models/llama-spm-e256-Q4_K_M.gguf}
exec build/release/kiln inspect "$model"
