#!/bin/bash
# Regenerates the audio references of tests/conformance/audio_encoder_test.cpp and
# tests/fault/audio_cli_test.cpp from llama.cpp's libmtmd.
#   tests/conformance/data/mtmd-audio/make_refs.sh LCPP [BUILD]
# LCPP: a llama.cpp tree built with cmake into BUILD (default LCPP/build: libmtmd, libllama; the source that
# node-llama-cpp@3.22.1 bundles, see tools/fixtures/mkmtmd_fixtures.sh). Needs the text model
# build/test-data/models/llama-spm-e128-f32.gguf (tools/fixtures/make_test_data.py) and Debian's
# python3-numpy.
#
# Writes here: mmproj-{ultravox,qwen2a,voxtral,glma,musicflamingo}.gguf (random weights,
# tools/fixtures/mkmmproj_audio.py; stack factors 4 and 5, which divide the encoder's positions:
# llama.cpp at the reference commit aborts on a partial last stack), and
# NAME-voiced.{ref.json,embd.f32}: mtmd_oracle's exact run (F32 attention without flash, F32 KV
# cache) on tests/data/audio/voiced-16k.wav with the prompt
# "USER: <__media__>Describe the image.\nASSISTANT:" (the embeddings, the chunk layout, 8 greedy
# tokens), shrunk by ../mtmd/compact_ref.py.
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
L=$(realpath "$1")
B=$(realpath "${2:-$L/build}")
T=$(realpath "$D/../../../../tools/fixtures")
PY=/usr/bin/python3
TEXT=$(realpath "$D/../../../../build/test-data/models/llama-spm-e128-f32.gguf")
WAV=$(realpath "$D/../../../data/audio/voiced-16k.wav")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$D"

gcc -O2 -std=c11 -o "$W/mtmd_oracle" "$T/mtmd_oracle.c" -I"$L/include" -I"$L/ggml/include" \
  -I"$L/tools/mtmd" -L"$B/bin" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$B/bin" -lm

(cd "$T" && $PY mkmmproj_audio.py --out "$D/mmproj-ultravox.gguf" --text-model "$TEXT" --proj ultravox --stack 4 &&
  $PY mkmmproj_audio.py --out "$D/mmproj-qwen2a.gguf" --text-model "$TEXT" --proj qwen2a --mel 128 &&
  $PY mkmmproj_audio.py --out "$D/mmproj-voxtral.gguf" --text-model "$TEXT" --proj voxtral --stack 5 &&
  $PY mkmmproj_audio.py --out "$D/mmproj-glma.gguf" --text-model "$TEXT" --proj glma --mel 128 --stack 4 &&
  $PY mkmmproj_audio.py --out "$D/mmproj-musicflamingo.gguf" --text-model "$TEXT" --proj musicflamingo --mel 128)

for p in ultravox qwen2a voxtral glma musicflamingo; do
  "$W/mtmd_oracle" -m "$TEXT" --mmproj "mmproj-$p.gguf" --image "$WAV" -o "$W/out-$p" --n-gen 8 -t 2 \
    -p $'USER: <__media__>Describe the image.\nASSISTANT:'
  $PY ../mtmd/compact_ref.py "$W/out-$p" "$p-voiced"
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
