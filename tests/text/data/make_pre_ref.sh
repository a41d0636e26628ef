#!/bin/sh
# Regenerates tests/text/data/pre_ref.json: llama.cpp's tokens for pre_cases.json with the GPT-2
# vocabulary under each pre-tokenizer name (the file's tokenizer.ggml.pre replaced).
#   NODE_PATH=/path/to/node_modules sh tests/text/data/make_pre_ref.sh ../shared
set -e
SHARED=${1:-../shared}
DATA=$(dirname "$0")
TMP=$(mktemp -d)
/usr/bin/python3 - "$SHARED" "$TMP" "$DATA" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1] + "/tools")
from gguf_lite import Reader, Writer
shared, tmp, data = sys.argv[1:4]
pres = json.load(open(data + "/pre_ref.json"))["tokens"].keys()
r = Reader(shared + "/fixtures/vocab/ggml-vocab-gpt-2.gguf")
for p in pres:
    w = Writer(f"{tmp}/{p}.gguf")
    for k, (t, v, et) in r.kv.items():
        w.add(k, t, p if k == "tokenizer.ggml.pre" else v, et)
    w.write()
PY
for f in "$TMP"/*.gguf; do
  node "$SHARED/tools/oracle.mjs" "$f" "$DATA/pre_cases.json" > "${f%.gguf}.json"
done
/usr/bin/python3 - "$TMP" "$DATA" <<'PY'
import glob, json, os, sys
tmp, data = sys.argv[1:3]
out = {os.path.basename(f)[:-5]: [c["tokens"] for c in json.load(open(f))["cases"]] for f in sorted(glob.glob(tmp + "/*.json"))}
json.dump({"engine": "llama.cpp via node-llama-cpp 3.22.1", "vocab": "ggml-vocab-gpt-2.gguf with tokenizer.ggml.pre replaced",
           "tokens": out}, open(data + "/pre_ref.json", "w"), separators=(",", ":"))
PY
rm -rf "$TMP"
