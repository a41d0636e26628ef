#!/usr/bin/env bash
# Regenerates the rope-variant conformance data: the two small models of make_rope_models.py and
# llama.cpp's outputs for them (F32 KV cache, no flash attention), via tools/fixtures/oracle.mjs.
# ORACLE_NODE_MODULES must hold node-llama-cpp@3.22.1; on a CPU with AMX remove its
# `sapphirerapids` CPU variant first, so that llama.cpp runs the AVX-512 kernels kiln follows.
# usage: tests/conformance/data/make_rope_refs.sh   (from the repository root)
set -euo pipefail
data=tests/conformance/data
modules=${ORACLE_NODE_MODULES:?set ORACLE_NODE_MODULES to a node_modules with node-llama-cpp@3.22.1}
/usr/bin/python3 "$data/make_rope_models.py" "$data"
long=$(/usr/bin/python3 -c "print(' '.join(['The river ran past the mill and the old stone bridge, and the children counted boats.'] * 14))")
cat > /tmp/kiln-rope-cases.json <<JSON
{"top": 20, "flash_attention": false, "kv_type": "F32", "cases": [
  {"text": "In the beginning was the word, and the word was with the river.", "positions": "all", "n_predict": 24},
  {"text": "$long", "positions": "last", "n_predict": 16}
]}
JSON
cat > /tmp/kiln-yarn-cases.json <<JSON
{"top": 20, "flash_attention": false, "kv_type": "F32", "cases": [
  {"text": "In the beginning was the word, and the word was with the river; it ran on and on.", "positions": "all", "n_predict": 24}
]}
JSON
NODE_PATH=$modules node tools/fixtures/oracle.mjs "$data/llama-ropefreqs.gguf" /tmp/kiln-rope-cases.json > "$data/llama-ropefreqs.json"
NODE_PATH=$modules node tools/fixtures/oracle.mjs "$data/qwen2-yarn.gguf" /tmp/kiln-yarn-cases.json > "$data/qwen2-yarn.json"
echo "wrote $data/llama-ropefreqs.json $data/qwen2-yarn.json"
