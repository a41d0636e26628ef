#!/usr/bin/env bash
# Writes the lookup caches that tests compare kiln's with, using llama.cpp's own tools built from
# the source bundled in node-llama-cpp 3.22.1 (the reference release). Run by hand; CI only reads
# the files.
#   tests/llm/data/lookup/make_lookup_refs.sh LLAMA_BIN_DIR
# genesis-kjv.lcs: llama-lookup-create's static cache (2-grams) of genesis.txt, default model.
# moses-kjv.lcd:   llama-lookup's dynamic cache after one greedy generation from "And God said unto
#                  Moses," (-n 64: llama-lookup stops past 64, at 66 generated tokens here), written
#                  to a file that did not exist before.
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
model=$here/../../../../models/kjv-llama-q8_0.gguf
"$bin/llama-lookup-create" -m "$model" -f "$here/genesis.txt" -lcs "$here/genesis-kjv.lcs" -t 1
rm -f "$here/moses-kjv.lcd"
"$bin/llama-lookup" -m "$model" -p "And God said unto Moses," -n 64 --temp 0 -c 128 -t 2 -lcd "$here/moses-kjv.lcd"
