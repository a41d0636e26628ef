#!/bin/bash
# Regenerates the vision references of tests/conformance/vision_test.cpp from llama.cpp's libmtmd.
#   tests/conformance/data/mtmd/make_refs.sh LCPP FIXTURES
# LCPP: a llama.cpp tree built with cmake into LCPP/build (libmtmd, libllama), e.g. the source that
# node-llama-cpp@3.22.1 bundles (see tools/fixtures/mkmtmd_fixtures.sh). FIXTURES: the output
# folder of tools/fixtures/mkmtmd_fixtures.sh. Needs the text model
# build/test-data/models/llama-spm-e128-f32.gguf (tools/fixtures/make_test_data.py), Debian's
# python3-numpy, libpng-dev and libjpeg-dev.
#
# The first four references (mmproj-gemma3/mlp.gguf on test-224.png, exact and with llama.cpp's
# defaults) are FIXTURES', shrunk by compact_ref.py; the rest are made here:
# other image sizes (resize + pad), F16 weights, a pooling factor of 2, a JPEG, a prompt that starts
# with the image, flash attention with F16 weights.
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
L=$(realpath "$1")
F=$(realpath "$2")
T=$(realpath "$D/../../../../tools/fixtures")
PY=/usr/bin/python3
TEXT=$(realpath "$D/../../../../build/test-data/models/llama-spm-e128-f32.gguf")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$D"

gcc -O2 -std=c11 -o "$W/mtmd_oracle" "$T/mtmd_oracle.c" -I"$L/include" -I"$L/ggml/include" \
  -I"$L/tools/mtmd" -L"$L/build/bin" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$L/build/bin" -lm
gcc -O2 -o "$W/jpeg_from_png" jpeg_from_png.c -lpng -ljpeg

for p in gemma3 mlp; do
  cp "$F/mmproj-$p.gguf" .
  $PY compact_ref.py "$F/out-$p-test-224" "$p-test-224"
  # The defaults run has no .embd.f32: write one from its JSON.
  cp "$F/out-$p-test-224-cli.json" "$W/$p-fa.json"
  $PY -c "import json, struct, sys; d = json.load(open(sys.argv[1])); open(sys.argv[2], 'wb').write(b''.join(struct.pack('<f', v) for r in d['image_embd'] for v in r))" \
    "$W/$p-fa.json" "$W/$p-fa.embd.f32"
  $PY compact_ref.py "$W/$p-fa" "$p-test-224-fa"
done
cp "$F/test-224.png" .

(cd "$T" && $PY mkimage.py --out "$D/test-300x200.png" --width 300 --height 200 &&
  $PY mkimage.py --out "$D/test-100x150.png" --width 100 --height 150 --cell 12 &&
  $PY mkimage.py --out "$W/photo.png" --width 160 --height 120 --cell 20 &&
  $PY mkmmproj.py --proj gemma3 --type f16 --image-size 112 --merge 2 --embd 64 --ff 160 --layers 2 --heads 4 \
    --seed 7 --out "$D/mmproj-gemma3-f16.gguf" --text-model "$TEXT" &&
  $PY mkmmproj.py --proj mlp --type f16 --image-size 112 --patch 16 --embd 48 --ff 96 --layers 3 --heads 2 \
    --seed 11 --out "$D/mmproj-mlp-f16.gguf" --text-model "$TEXT")
"$W/jpeg_from_png" "$W/photo.png" photo-160x120.jpg

run() {  # NAME MMPROJ IMAGE [oracle flags]
  local name=$1 mmproj=$2 image=$3
  shift 3
  "$W/mtmd_oracle" -m "$TEXT" --mmproj "$mmproj" --image "$image" -o "$W/$name" --n-gen 8 "$@" >/dev/null
  $PY compact_ref.py "$W/$name" "$name"
}
run gemma3-300x200 mmproj-gemma3.gguf test-300x200.png
run mlp-100x150 mmproj-mlp.gguf test-100x150.png
run gemma3-f16-photo mmproj-gemma3-f16.gguf photo-160x120.jpg -p "<__media__>What is in the picture?"
run mlp-f16-300x200-fa mmproj-mlp-f16.gguf test-300x200.png --llama-defaults
