#!/usr/bin/python3
"""What a full KV pool costs: S streams whose contexts add up to more than the pool, against a pool
with room for all of them.

  bench/kv_pool_overflow.py KILN_BINARY MODEL.gguf [--streams 8] [--prompt 450] [--tokens 62]
                            [--ctx 2048] [--rounds 3] [--threads 2]

Starts two `kiln serve -np S -kvu` on free loopback ports, one with `-c CTX` (tight: S x (prompt +
tokens) cells exceed it) and one with a context that holds every stream (roomy), and runs rounds
of: the S streams at once against roomy, then against tight (A B A B ...). Each stream asks
/completion for --tokens tokens after a --prompt-token prompt of its own (greedy, ignore_eos), so
no prompt cache is shared. Per round and server: the wall time until the last stream ended, the
median and slowest stream's latency, and the servers' kiln:generations_parked_total and
kiln:idle_caches_cleared_total; then the medians of the per-round ratios tight / roomy, and
whether every stream's text was the same on both servers. Standard library only.
"""
import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request

from serve_throughput import post, start_serve


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


def prompts(port, n_streams, n_prompt, round_index):
    out = []
    for i in range(n_streams):
        text = " ".join([f"Round {round_index}, stream {i}: and the earth was without form"] * (n_prompt // 4))
        ids = post(port, "/tokenize", {"content": text})["tokens"][:n_prompt]
        if len(ids) < n_prompt:
            sys.exit("the prompt text is too short for --prompt")
        out.append(ids)
    return out


def run_round(port, bodies):
    """(wall seconds, per-stream latencies, texts) of the bodies sent at once."""
    lat = [0.0] * len(bodies)
    texts = [None] * len(bodies)
    errors = []

    def client(i):
        t = time.perf_counter()
        try:
            texts[i] = post(port, "/completion", bodies[i])["content"]
        except Exception as e:  # noqa: BLE001: reported below
            errors.append(f"stream {i}: {e}")
        lat[i] = time.perf_counter() - t

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("; ".join(errors))
    return time.perf_counter() - t0, lat, texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("model")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=450)
    ap.add_argument("--tokens", type=int, default=62)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    need = a.streams * (a.prompt + a.tokens)
    roomy_ctx = (need + 255) // 256 * 256 + 256
    print(f"{a.streams} streams x ({a.prompt} + {a.tokens}) = {need} cells; tight pool {a.ctx} "
          f"({need / a.ctx:.2f}x), roomy pool {roomy_ctx}")
    servers = {}
    for name, ctx in (("roomy", roomy_ctx), ("tight", a.ctx)):
        servers[name] = start_serve([a.kiln, "serve", "-m", a.model, "-c", str(ctx), "-np", str(a.streams), "-kvu",
                                     "-t", str(a.threads)])
    try:
        ratios = {"wall": [], "median": [], "slowest": []}
        same = True
        for r in range(a.rounds):
            bodies = [{"prompt": p, "n_predict": a.tokens, "temperature": 0, "ignore_eos": True}
                      for p in prompts(servers["roomy"][0], a.streams, a.prompt, r)]
            got = {}
            for name in ("roomy", "tight"):
                got[name] = run_round(servers[name][0], bodies)
                wall, lat, _ = got[name]
                port = servers[name][0]
                print(f"round {r} {name}: wall {wall:.2f} s, median stream {statistics.median(lat):.2f} s, "
                      f"slowest {max(lat):.2f} s, parked {metric(port, 'kiln:generations_parked_total'):.0f}, "
                      f"idle caches cleared {metric(port, 'kiln:idle_caches_cleared_total'):.0f} (cumulative)")
            (rw, rl, rt), (tw, tl, tt) = got["roomy"], got["tight"]
            same = same and rt == tt
            ratios["wall"].append(tw / rw)
            ratios["median"].append(statistics.median(tl) / statistics.median(rl))
            ratios["slowest"].append(max(tl) / max(rl))
        print("tight / roomy, median of rounds: " +
              ", ".join(f"{k} {statistics.median(v):.2f}x" for k, v in ratios.items()))
        print("texts identical on both servers:", same)
    finally:
        for _, proc in servers.values():
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
