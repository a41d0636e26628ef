#!/usr/bin/env python3
"""What a JSON schema costs in decoding speed: kiln's server and llama-server on the same model and
the same /completion request, with and without `json_schema`, interleaved (kiln plain, kiln schema,
llama plain, llama schema, repeated), medians of the servers' own decode rates
(timings.predicted_per_second). Run it under /work/models/i12/prio.sh on a quiet machine:

  /work/models/i12/prio.sh python3 bench/grammar_overhead.py --model /work/models/i12/llama-1.1b-q4_0.gguf \\
      --kiln build/release/kiln --llama-server /work/peer/llama.cpp/build/bin/llama-server --rounds 3

The model may have random weights: the schema keeps its output valid JSON whatever the logits;
unconstrained runs ban the end-of-generation token to reach n_predict (the reply's predicted_n,
printed, says how many tokens each run decoded).
"""
import argparse
import os
import statistics
import sys
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_server import LlamaServer  # noqa: E402

# An object whose long string and open array let a random model run to n_predict.
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "count": {"type": "integer"},
    },
    "required": ["title", "tags", "count"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--kiln", default="build/release/kiln")
    ap.add_argument("--llama-server", default="/work/peer/llama.cpp/build/bin/llama-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--eog-token", type=int, default=2, help="the end-of-generation token (2: </s> of llama SPM)")
    args = ap.parse_args()
    common = ["-m", args.model, "-t", str(args.threads), "-c", "1024", "-np", "1"]
    servers = {"kiln": LlamaServer([args.kiln, "serve"], common),
               "llama.cpp": LlamaServer(args.llama_server, common + ["--no-webui"])}
    try:
        base = {"prompt": "Here is a short description of a book as JSON:\n", "n_predict": args.n_predict,
                "temperature": args.temperature, "seed": 1, "cache_prompt": False}
        # Unconstrained, the end-of-generation token is banned so that the run reaches n_predict; under
        # the schema it stays allowed (llama-server fails a request whose grammar is complete while
        # that token is banned), so the schema run may end sooner.
        no_eog = {"logit_bias": [[args.eog_token, False]]}
        runs = {(s, c): [] for s in servers for c in ("plain", "schema")}
        for _ in range(args.rounds):
            for s, server in servers.items():
                for c in ("plain", "schema"):
                    body = dict(base, **({"json_schema": SCHEMA} if c == "schema" else no_eog))
                    try:
                        r = server.request("/completion", body)
                    except urllib.error.HTTPError as e:
                        sys.exit(f"{s} {c}: HTTP {e.code}: {e.read().decode()}")
                    t = r["timings"]
                    runs[(s, c)].append((t["predicted_per_second"], t["predicted_n"]))
        med = {k: statistics.median(v[0] for v in vs) for k, vs in runs.items()}
        for (s, c), vs in runs.items():
            print(f"{s:9s} {c:6s} tok/s {' '.join(f'{v:.2f}' for v, _ in vs)}  median {med[(s, c)]:.2f}"
                  f"  tokens {' '.join(str(n) for _, n in vs)}")
        for s in servers:
            print(f"{s}: schema/plain {med[(s, 'schema')] / med[(s, 'plain')]:.3f}")
        print(f"kiln schema / llama.cpp schema {med[('kiln', 'schema')] / med[('llama.cpp', 'schema')]:.3f}")
    finally:
        for server in servers.values():
            server.close()


if __name__ == "__main__":
    main()
