#!/usr/bin/python3
"""Aggregate generation speed of `kiln serve` with S concurrent streaming clients against one.

  bench/serve_throughput.py KILN_BINARY MODEL.gguf [--streams 8] [--tokens 32] [--rounds 3] [--threads 2]

Starts `kiln serve -m MODEL --parallel S` on a free loopback port, then runs rounds of: one client
alone, then S clients at once, each asking /v1/completions for --tokens tokens (greedy, end of
text suppressed with logit_bias so that every request generates exactly that many; the prompts
differ per client so that no prompt cache is shared). Two aggregate rates per round:
  round:      completion tokens (from `usage`) / wall time of the round, prompts included;
  generation: streamed tokens while every client of the round is generating (from the last
              client's first token to the first client's last token) / that window: the steady
              rate of decoding, without the prompts (each SSE event carries one token here).
Prints each round and the medians over rounds of the per-round ratios (S streams / 1 stream),
measured back to back so machine noise hits both alike. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request


def post(port, path, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_ready(port, proc, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("kiln serve exited while loading")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    sys.exit("kiln serve did not become ready")


def start_serve(command):
    """(port, process) of `command` (a `kiln serve` command line without --port) started on a free
    port and ready; its stderr is drained."""
    proc = subprocess.Popen(command + ["--port", "0"], stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        sys.exit("kiln serve did not report its port")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    wait_ready(port, proc)
    return port, proc


def run_round(port, n_clients, n_tokens, eos, round_index):
    """(round rate, generation rate): aggregate tokens/s of n_clients concurrent streaming requests."""
    counts = [0] * n_clients
    stamps = [[] for _ in range(n_clients)]  # arrival time of each content event
    errors = []

    def client(i):
        body = {"prompt": f"Round {round_index}, client {i}: the story begins", "max_tokens": n_tokens,
                "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
                "logit_bias": {str(eos): -100}}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                for line in r:
                    line = line.decode().strip()
                    if line.startswith("data: {"):
                        event = json.loads(line[6:])
                        if event.get("usage"):
                            counts[i] = event["usage"]["completion_tokens"]
                        elif event["choices"] and event["choices"][0].get("text"):
                            stamps[i].append(time.time())
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    if errors or min(counts) != n_tokens:
        sys.exit(f"round {round_index}, {n_clients} clients: errors {errors}, tokens {counts}")
    t_begin = max(s[0] for s in stamps)
    t_end = min(s[-1] for s in stamps)
    in_window = sum(1 for s in stamps for t in s if t_begin < t <= t_end)
    if t_end <= t_begin or in_window == 0:
        sys.exit(f"round {round_index}, {n_clients} clients: no window where all clients generate")
    return sum(counts) / wall, in_window / (t_end - t_begin)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kiln")
    p.add_argument("model")
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    ctx = a.streams * (a.tokens + 64)
    port, proc = start_serve([a.kiln, "serve", "-m", a.model, "--parallel", str(a.streams), "-c", str(ctx),
                              "-t", str(a.threads)])
    try:
        eos_text = get(port, "/props")["eos_token"]
        eos_ids = post(port, "/tokenize", {"content": eos_text, "parse_special": True})["tokens"]
        if len(eos_ids) != 1:
            sys.exit(f"the EOS text {eos_text!r} is not one token: {eos_ids}")
        eos = eos_ids[0]
        run_round(port, 1, 4, eos, -1)  # warm-up: pages the weights in
        round_ratios, gen_ratios = [], []
        for r in range(a.rounds):
            single, single_gen = run_round(port, 1, a.tokens, eos, r)
            multi, multi_gen = run_round(port, a.streams, a.tokens, eos, r)
            round_ratios.append(multi / single)
            gen_ratios.append(multi_gen / single_gen)
            print(f"round {r + 1}: 1 stream {single:.2f} t/s (generation {single_gen:.2f}), {a.streams} streams "
                  f"{multi:.2f} t/s aggregate (generation {multi_gen:.2f}); ratios {multi / single:.2f}x, "
                  f"generation {multi_gen / single_gen:.2f}x", flush=True)
        print(f"median ratios over {a.rounds} rounds: {statistics.median(round_ratios):.2f}x with prompts, "
              f"{statistics.median(gen_ratios):.2f}x generation")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


if __name__ == "__main__":
    main()
