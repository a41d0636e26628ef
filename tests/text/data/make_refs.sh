#!/bin/sh
# Regenerates llama.cpp's references for the tokenizer tests, for every vocabulary of the test data
# (build/test-data/vocab, made by tools/fixtures/make_test_data.py): ref-VOCAB.json, the tokens of
# hard_cases.json (tools/fixtures/oracle.mjs), and vocab_info.json (vocab_info.mjs).
#   NODE_PATH=/path/to/node_modules sh tests/text/data/make_refs.sh   (from the repository root)
# node_modules must hold node-llama-cpp@3.22.1 (npm install node-llama-cpp@3.22.1 in any folder).
set -eu
root=$(pwd)
data=$root/tests/text/data
vocab=${KILN_TEST_DATA_GEN_DIR:-$root/build/test-data}/vocab
for f in "$vocab"/ggml-vocab-*.gguf; do
  name=$(basename "$f" .gguf)
  # run beside the file, so that the reference names it without a local path
  (cd "$vocab" && node "$root/tools/fixtures/oracle.mjs" "$name.gguf" "$data/hard_cases.json") > "$data/ref-${name#ggml-vocab-}.json"
done
node "$data/vocab_info.mjs" "$vocab" > "$data/vocab_info.json"
echo "wrote $data/ref-*.json and $data/vocab_info.json"
