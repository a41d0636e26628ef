#!/usr/bin/python3
"""Writes tests/llm/data/spec_refs.json: how many tokens llama.cpp's server drafts and accepts with
its n-gram draft sources, for models, prompts and settings that kiln's speculative_ngram_refs test
replays (it checks that kiln drafts and accepts the same numbers and generates the same text).

  tests/llm/data/make_spec_refs.py LLAMA_SERVER [--out tests/llm/data/spec_refs.json]

LLAMA_SERVER: llama.cpp's llama-server built from the source bundled in node-llama-cpp 3.22.1
(the reference release). Each case runs in a fresh server (ngram-mod's table and a slot's n-gram
state outlive a request there), one greedy /completion request, F32 KV cache without flash
attention (the settings where kiln's logits equal llama.cpp's most closely), 2 threads.
Standard library only (and bench/llama_server.py).
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from llama_server import LlamaServer  # noqa: E402
TEST_MODELS = os.path.join(ROOT, "build", "test-data", "models")  # tools/fixtures/make_test_data.py
MODELS = {
    "default": os.path.join(ROOT, "models", "kjv-llama-q8_0.gguf"),
    "llama-spm-e128-f32": os.path.join(TEST_MODELS, "llama-spm-e128-f32.gguf"),
    "qwen2-e64-Q8_0": os.path.join(TEST_MODELS, "qwen2-e64-Q8_0.gguf"),
}
N_CTX = 1024  # the server's -c; a slot's context is at most the model's trained context

# Prompts the default model (trained context 128) continues by repeating: its greedy text loops, or
# the prompt already holds the loop; and one whose answer quotes the prompt's words.
MOSES = "And God said unto Moses,"
LAND = "And the people" + " of the land" * 20
GROUNDED = ("Copy the verse exactly.\nVerse: In the beginning God created the heaven and the earth. And the earth was "
            "without form, and void.\nCopy: In the beginning God created the heaven and the earth. And the earth was")

# (model, prompt, n_predict, speculative settings); each key of a source's settings maps to the
# llama.cpp flag --spec-<source>-<key with - for _>; "lookup" names lookup-cache files (-lcs, -lcd).
CASES = [
    ("default", MOSES, 96, {"types": "ngram-simple", "ngram-simple": {"size_n": 2}}),
    ("default", MOSES, 96, {"types": "ngram-map-k", "ngram-map-k": {"size_n": 2, "size_m": 8}}),
    ("default", MOSES, 96, {"types": "ngram-map-k4v", "ngram-map-k4v": {"size_n": 2, "size_m": 8, "min_hits": 2}}),
    ("default", MOSES, 96, {"types": "ngram-mod", "ngram-mod": {"n_match": 4, "n_min": 2, "n_max": 16}}),
    ("default", MOSES, 96, {"types": "ngram-cache"}),
    ("default", "In the beginning", 100,
     {"types": "ngram-simple,ngram-map-k,ngram-mod,ngram-cache",
      "ngram-simple": {"size_n": 3, "size_m": 6}, "ngram-map-k": {"size_n": 2, "size_m": 4},
      "ngram-mod": {"n_match": 3, "n_min": 1, "n_max": 8}}),
    # llama.cpp's defaults
    ("default", LAND, 60, {"types": "ngram-simple"}),
    ("default", LAND, 60, {"types": "ngram-map-k"}),
    ("default", LAND, 60, {"types": "ngram-map-k4v"}),
    ("default", LAND, 60, {"types": "ngram-mod"}),
    ("default", LAND, 60, {"types": "ngram-cache"}),
    ("default", GROUNDED, 32, {"types": "ngram-cache"}),
    # ngram-cache with lookup caches (tests/llm/data/lookup: llama.cpp's tools made them)
    ("default", "And God called the light", 64, {"types": "ngram-cache", "lookup": {"static": "genesis-kjv.lcs"}}),
    ("default", "And God said unto Moses,", 64, {"types": "ngram-cache", "lookup": {"dynamic": "moses-kjv.lcd"}}),
    ("default", "And the evening", 64,
     {"types": "ngram-cache", "lookup": {"static": "genesis-kjv.lcs", "dynamic": "moses-kjv.lcd"}}),
    ("llama-spm-e128-f32", "The quick brown fox jumps over the lazy dog.", 64,
     {"types": "ngram-simple,ngram-cache", "ngram-simple": {"size_n": 2, "size_m": 8}}),
    ("qwen2-e64-Q8_0", "The quick brown fox jumps over the lazy dog.", 64,
     {"types": "ngram-map-k,ngram-mod", "ngram-map-k": {"size_n": 2, "size_m": 8},
      "ngram-mod": {"n_match": 2, "n_min": 1, "n_max": 8}}),
]


LOOKUP = os.path.join(ROOT, "tests", "llm", "data", "lookup")
LOOKUP_FLAGS = {"static": "-lcs", "dynamic": "-lcd"}


def spec_args(spec):
    args = ["--spec-type", spec["types"]]
    for source, settings in spec.items():
        if source == "types":
            continue
        if source == "lookup":  # {"static": FILE, "dynamic": FILE} under LOOKUP
            for kind, name in settings.items():
                args += [LOOKUP_FLAGS[kind], os.path.join(LOOKUP, name)]
            continue
        for key, value in settings.items():
            args += ["--spec-%s-%s" % (source, key.replace("_", "-")), str(value)]
    return args


def run_case(server, model, prompt, n_predict, spec):
    args = ["-m", MODELS[model], "-np", "1", "-c", str(N_CTX), "-t", "2", "-fa", "off", "-ctk", "f32", "-ctv", "f32",
            "--no-warmup"] + spec_args(spec)
    with LlamaServer(server, args) as s:
        n_ctx = s.request("/props")["default_generation_settings"]["n_ctx"]  # capped by the model's
        r = s.request("/completion", {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "seed": 1,
                                      "cache_prompt": False, "return_tokens": True})
    t = r["timings"]
    return {"model": model, "prompt": prompt, "n_predict": n_predict, "n_ctx": n_ctx, "spec": spec,
            "draft_n": t.get("draft_n", 0), "draft_n_accepted": t.get("draft_n_accepted", 0),
            "tokens": r.get("tokens", []), "content": r["content"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "llm", "data", "spec_refs.json"))
    a = p.parse_args()
    cases = []
    for model, prompt, n_predict, spec in CASES:
        c = run_case(a.server, model, prompt, n_predict, spec)
        print("%-20s %-45s drafted %4d accepted %4d" % (model, spec["types"], c["draft_n"], c["draft_n_accepted"]))
        cases.append(c)
    with open(a.out, "w") as f:
        json.dump({"generator": "tests/llm/data/make_spec_refs.py", "llama_cpp": "node-llama-cpp 3.22.1 bundle",
                   "server_flags": "-np 1 -c %d -t 2 -fa off -ctk f32 -ctv f32" % N_CTX, "cases": cases}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
