#!/bin/sh
# Regenerates tests/convert/data/kjv_llama_f32.oracle.json: converts models/kjv-llama to an F32
# GGUF with `kiln convert` and runs llama.cpp (the oracle, tools/fixtures/oracle.mjs) on the
# prompts of tests/convert/data/kjv_llama_ref.json (written by tools/train/train.py).
# convert_test.cpp then compares the oracle's tokens and logits with the PyTorch reference.
# usage: tests/convert/make_oracle_ref.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:?usage: make_oracle_ref.sh BUILD_DIR}
oracle_modules=${ORACLE_NODE_MODULES:-/work/oracle/node_modules}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/kiln" convert models/kjv-llama "$tmp/kjv-llama-f32.gguf" --outtype f32
/usr/bin/python3 - "$tmp/cases.json" <<'PY'
import json, sys
ref = json.load(open("tests/convert/data/kjv_llama_ref.json"))
cases = [{"text": p["text"], "positions": "all", "n_predict": 8} for p in ref["prompts"]]
json.dump({"top": 20, "flash_attention": False, "kv_type": "F32", "cases": cases}, open(sys.argv[1], "w"), indent=1)
PY
NODE_PATH=$oracle_modules node tools/fixtures/oracle.mjs "$tmp/kjv-llama-f32.gguf" "$tmp/cases.json" \
  > tests/convert/data/kjv_llama_f32.oracle.json
echo "wrote tests/convert/data/kjv_llama_f32.oracle.json"
