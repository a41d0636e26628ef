#!/bin/sh
# Regenerates tests/text/data/bytes_ref.json: llama.cpp's tokens for byte strings that are not valid
# UTF-8 (and a few that are), for every vocabulary of the test data, through
# tools/fixtures/tokenize_oracle.c built against a llama.cpp of the reference release.
#   LCPP=/path/to/llama.cpp sh tests/text/data/make_bytes_ref.sh   (from the repository root;
#   LCPP/build/bin holds libllama.so, see tokenize_oracle.c)
set -eu
root=$(pwd)
lcpp=${LCPP:?set LCPP to a llama.cpp source tree built into LCPP/build}
vocab=${KILN_TEST_DATA_GEN_DIR:-$root/build/test-data}/vocab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O1 -o "$tmp/oracle" tools/fixtures/tokenize_oracle.c -I"$lcpp/include" -I"$lcpp/ggml/include" \
  -L"$lcpp/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$lcpp/build/bin"
# a\xffb, truncated sequences, lone continuation bytes, bytes never in UTF-8, overlong and surrogate
# forms, NUL, a BOM, U+FFFD itself, and valid text around invalid bytes
cases="61ff62 e282 8080 c0 f888808080 6f6bf09f98 c0af eda080 780079 efbbbf424f4d fffe efbfbd 636166c3a9e9206e61c3af7665 20ff20ff20 0a80"
for f in "$vocab"/ggml-vocab-*.gguf; do
  name=$(basename "$f" .gguf)
  "$tmp/oracle" "$f" $cases > "$tmp/${name#ggml-vocab-}.txt"
done
/usr/bin/python3 - "$tmp" "$root/tests/text/data/bytes_ref.json" <<'PY'
import glob, json, os, sys
tmp, out = sys.argv[1:3]
ref = {}
for f in sorted(glob.glob(tmp + "/*.txt")):
    cases = []
    for line in open(f):
        hexes, ids = line.rstrip("\n").split(":", 1)
        cases.append({"hex": hexes, "tokens": [int(t) for t in ids.split()]})
    ref[os.path.basename(f)[:-4]] = cases
json.dump({"engine": "llama.cpp (libllama of node-llama-cpp 3.22.1's source), llama_tokenize(add_special = false, "
           "parse_special = false)", "vocabs": ref}, open(out, "w"), indent=0)
PY
echo "wrote tests/text/data/bytes_ref.json"
