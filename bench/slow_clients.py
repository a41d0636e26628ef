#!/usr/bin/python3
"""Latency of `kiln serve` requests while idle and slowloris connections hold the server.

  bench/slow_clients.py KILN_BINARY MODEL.gguf [--idle 1000] [--slow 100] [--requests 7] [--rounds 3]

Starts `kiln serve -m MODEL --parallel 2` on a free loopback port, then runs rounds of: the median
latency of --requests sequential GET /health and short chat completions (8 tokens, greedy) on the
idle server, then the same while --idle connections stay open without sending and --slow
connections send a request head one byte a second. Requests that fail or exceed 30 s count as
30 s. Prints each round and the medians over rounds. Raises its own open-file limit to the hard
limit (it needs --idle + --slow + a few descriptors). Standard library only.
"""
import argparse
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time

TIMEOUT = 30.0


def timed(port, method, path, body=None):
    """Seconds one request took on a fresh connection (TIMEOUT when it failed or took longer)."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = c.getresponse()
        r.read()
        c.close()
        return time.monotonic() - t0 if r.status == 200 else TIMEOUT
    except Exception:
        return TIMEOUT


CHAT = {"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8, "temperature": 0}


def medians(port, n):
    health = [timed(port, "GET", "/health") for _ in range(n)]
    chat = [timed(port, "POST", "/v1/chat/completions", CHAT) for _ in range(n)]
    return statistics.median(health) * 1000, statistics.median(chat) * 1000


def hold(port, n_idle, n_slow, stop):
    """Opens the connections and trickles the slow ones' heads until `stop` is set."""
    idle = []
    slow = []
    for i in range(n_idle + n_slow):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setblocking(False)
            (idle if i < n_idle else slow).append(s)
        except OSError:
            pass
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    i = 0
    while not stop.wait(1.0 if i else 0.0):
        byte = head[i:i + 1] if i < len(head) else b"a"
        for s in slow:
            try:
                s.send(byte)
            except OSError:
                pass
        i += 1
    for s in idle + slow:
        s.close()
    return len(idle), len(slow)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kiln")
    ap.add_argument("model")
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--slow", type=int, default=100)
    ap.add_argument("--requests", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([a.kiln, "serve", "-m", a.model, "--port", str(port), "--parallel", "2",
                             "-c", "1024", "-t", str(a.threads)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while timed(port, "GET", "/health") >= TIMEOUT or proc.poll() is not None:
            if proc.poll() is not None or time.time() > deadline:
                sys.exit("kiln serve did not become ready")
            time.sleep(0.2)
        timed(port, "POST", "/v1/chat/completions", CHAT)  # warm-up
        rows = []
        for r in range(a.rounds):
            base = medians(port, a.requests)
            stop = threading.Event()
            holder = threading.Thread(target=hold, args=(port, a.idle, a.slow, stop))
            holder.start()
            time.sleep(3.0)  # connected, and a few slow bytes sent
            loaded = medians(port, a.requests)
            stop.set()
            holder.join()
            rows.append(base + loaded)
            print(f"round {r + 1}: idle server: health {base[0]:.1f} ms, chat {base[1]:.1f} ms; with {a.idle} idle + "
                  f"{a.slow} slowloris: health {loaded[0]:.1f} ms, chat {loaded[1]:.1f} ms", flush=True)
            time.sleep(1.0)
        med = [statistics.median(col) for col in zip(*rows)]
        print(f"median: idle server: health {med[0]:.1f} ms, chat {med[1]:.1f} ms; loaded: health {med[2]:.1f} ms, "
              f"chat {med[3]:.1f} ms (+{med[3] - med[1]:.1f} ms)")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
