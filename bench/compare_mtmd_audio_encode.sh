#!/bin/bash
# kiln run --audio against llama.cpp's llama-mtmd-cli --audio on one mmproj, interleaved A B x 3,
# 2 threads each; prints kiln's prompt time and libmtmd's batch encoding time per round.
# Usage: bench/compare_mtmd_audio_encode.sh [MMPROJ [TEXT_MODEL [AUDIO [LLAMA_BIN_DIR]]]]
# (defaults: the docs/performance.md setup: whisper-large-qwen2a.gguf made by
# tools/fixtures/mkmmproj_audio.py, the 128-wide fixture model, the fixture WAV,
# /work/llama-audio-build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
X=${1:-whisper-large-qwen2a.gguf}
M=${2:-build/test-data/models/llama-spm-e128-f32.gguf}
W=${3:-tests/data/audio/voiced-16k.wav}
L=${4:-/work/llama-audio-build/bin}
for r in 1 2 3; do
  echo "round $r kiln"
  build/release/kiln run -m "$M" --mmproj "$X" --audio "$W" -p '<__media__>' -n 1 -t 2 --temp 0 </dev/null 2>&1 |
    grep -E "prompt .* tokens"
  echo "round $r llama.cpp"
  LD_LIBRARY_PATH="$L" "$L/llama-mtmd-cli" -m "$M" --mmproj "$X" --audio "$W" -p '<__media__>' -n 1 -t 2 --temp 0 \
    --chat-template chatml </dev/null 2>&1 | grep -E "encoding done in"
done
