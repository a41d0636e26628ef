#!/usr/bin/env python3
"""Regenerates greedy_refs.json: llama-server's greedy text for every case of greedy_cases.json
(a GBNF grammar or a JSON schema, a prompt, n_predict) on every model below, the reference that
GrammarConformance (tests/server/grammar_conformance_test.cpp) holds kiln's server to, byte for
byte. Run by hand; CI never runs llama.cpp, only the committed outputs are read.

  LLAMA_SERVER=/work/peer/llama.cpp/build/bin/llama-server \\
    python3 tests/grammar/data/make_greedy_refs.py [--test-data build/test-data]

llama-server runs with its defaults (F16 KV cache, flash attention auto), one slot, two threads;
each request: temperature 0, cache_prompt false, the case's n_predict.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from llama_server import LlamaServer  # noqa: E402

# The fixture models of the greedy references (tests/data/reference) and the default model.
FIXTURES = ["llama-spm-e128-f32", "llama-spm-e256-Q4_0", "llama-spm-e256-Q4_K_M", "llama-spm-e256-Q6_K",
            "qwen2-e64-Q8_0", "qwen3-e64-Q8_0"]
DEFAULT_MODEL = "kjv-llama-q8_0"


def request_of(case, schemas):
    body = {"prompt": case["prompt"], "n_predict": case["n_predict"], "temperature": 0, "cache_prompt": False}
    if "grammar" in case:
        body["grammar"] = case["grammar"]
    else:
        body["json_schema"] = case.get("schema") or schemas[case["schema_ref"]]
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--test-data", default=os.path.join(ROOT, "build", "test-data"))
    ap.add_argument("--server", default=os.environ.get("LLAMA_SERVER", "/work/peer/llama.cpp/build/bin/llama-server"))
    ap.add_argument("--only", help="comma-separated model names (a partial run: only those are replaced)")
    args = ap.parse_args()
    cases = json.load(open(os.path.join(HERE, "greedy_cases.json")))["cases"]
    schemas = {s["name"]: s["schema"] for s in json.load(open(os.path.join(HERE, "schemas.json")))}
    models = [(m, os.path.join(args.test_data, "models", m + ".gguf")) for m in FIXTURES]
    models.append((DEFAULT_MODEL, os.path.join(ROOT, "models", DEFAULT_MODEL + ".gguf")))
    printed = subprocess.run([args.server, "--version"], capture_output=True, text=True)
    version = [line for line in (printed.stdout + printed.stderr).splitlines() if line.startswith("version:")]
    refs_path = os.path.join(HERE, "greedy_refs.json")
    if args.only:
        models = [m for m in models if m[0] in args.only.split(",")]
    out = json.load(open(refs_path)) if args.only and os.path.exists(refs_path) else {"models": {}}
    out["engine"] = "llama-server, " + (version[0] if version else "version unknown")
    for name, path in models:
        with LlamaServer(args.server, ["-m", path, "-c", "1024", "-np", "1", "-t", "2", "--no-webui"]) as server:
            results = {}
            for case in cases:
                t0 = time.time()
                r = server.request("/completion", request_of(case, schemas))
                print(f"  {case['name']}: {time.time() - t0:.1f} s", file=sys.stderr)
                results[case["name"]] = {"content": r["content"], "tokens": r.get("tokens", []),
                                         "stop_type": r.get("stop_type", "")}
            out["models"][name] = results
            print(f"{name}: {len(results)} cases", file=sys.stderr)
        with open(refs_path, "w") as f:  # after every model: a long run keeps what it finished
            json.dump(out, f, indent=1, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
