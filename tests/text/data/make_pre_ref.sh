#!/bin/sh
# Regenerates tests/text/data/pre_ref.json: llama.cpp's tokens for pre_cases.json with the GPT-2
# vocabulary (build/test-data/vocab, made by tools/fixtures/make_test_data.py) under each
# pre-tokenizer name (the file's tokenizer.ggml.pre replaced).
#   NODE_PATH=/path/to/node_modules sh tests/text/data/make_pre_ref.sh   (from the repository root)
set -e
ROOT=$(pwd)
VOCAB=${KILN_TEST_DATA_GEN_DIR:-$ROOT/build/test-data}/vocab
DATA=$ROOT/tests/text/data
TMP=$(mktemp -d)
/usr/bin/python3 - "$ROOT/tools/fixtures" "$VOCAB" "$TMP" "$DATA" <<'PY'
import json, sys
tools, vocab, tmp, data = sys.argv[1:5]
sys.path.insert(0, tools)
from gguf_lite import Reader, Writer
pres = json.load(open(data + "/pre_ref.json"))["tokens"].keys()
r = Reader(vocab + "/ggml-vocab-gpt-2.gguf")
for p in pres:
    w = Writer(f"{tmp}/{p}.gguf")
    for k, (t, v, et) in r.kv.items():
        w.add(k, t, p if k == "tokenizer.ggml.pre" else v, et)
    w.write()
PY
for f in "$TMP"/*.gguf; do
  node "$ROOT/tools/fixtures/oracle.mjs" "$f" "$DATA/pre_cases.json" > "${f%.gguf}.json"
done
/usr/bin/python3 - "$TMP" "$DATA" <<'PY'
import glob, json, os, sys
tmp, data = sys.argv[1:3]
out = {os.path.basename(f)[:-5]: [c["tokens"] for c in json.load(open(f))["cases"]] for f in sorted(glob.glob(tmp + "/*.json"))}
json.dump({"engine": "llama.cpp via node-llama-cpp 3.22.1", "vocab": "ggml-vocab-gpt-2.gguf with tokenizer.ggml.pre replaced",
           "tokens": out}, open(data + "/pre_ref.json", "w"), separators=(",", ":"))
PY
rm -rf "$TMP"
