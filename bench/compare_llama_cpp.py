#!/usr/bin/python3
"""kiln against llama.cpp on the same GGUF file: prompt processing, generation, batched generation.

  bench/compare_llama_cpp.py KILN_BINARY MODEL.gguf [MODEL.gguf...] --node-modules DIR [-p 512]
                             [-n 64] [-d 0] [--streams 8] [--rounds 3] [--threads 2]

The peer is llama.cpp's prebuilt CPU build from npm (node-llama-cpp@3.22.1: `npm install
node-llama-cpp@3.22.1` in DIR's parent), driven through its C API by bench/llama_cpp_peer.cpp,
which this script compiles against the llama.h of the package's llama.cpp release (its git
bundle) and links with the package's libllama; the build goes to build/llama_cpp_peer/. Rounds
alternate kiln (`kiln bench -r 1`) and llama.cpp with the same tests, file and thread count; the
table gives each side's median tokens/s and the median over rounds of kiln / llama.cpp, and each
side's peak resident memory over a round (the process's maximum RSS, from wait4: weights, KV
cache and compute buffers, mapped file pages counted while resident). -d D runs every test after
D tokens in the KV cache on both sides (llama-bench's depth).
Standard library only (plus g++ and git).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_peer(node_modules):
    bins = os.path.join(node_modules, "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
    bundle = os.path.join(node_modules, "node-llama-cpp", "llama", "gitRelease.bundle")
    for path in (bins, bundle):
        if not os.path.exists(path):
            sys.exit(f"{path} not found: is node-llama-cpp@3.22.1 installed in {node_modules}?")
    out_dir = os.path.join(ROOT, "build", "llama_cpp_peer")
    src = os.path.join(out_dir, "llama.cpp")
    if not os.path.isdir(src):
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["git", "clone", "-q", bundle, src], check=True)
    libs = [f for f in os.listdir(bins) if re.fullmatch(r"lib(llama|ggml)\.v[\d.]+\.so", f)] + ["libggml-base.so"]
    exe = os.path.join(out_dir, "llama_cpp_peer")
    subprocess.run(["g++", "-O2", "-std=c++17", "-I", os.path.join(src, "include"), "-I",
                    os.path.join(src, "ggml", "include"), os.path.join(ROOT, "bench", "llama_cpp_peer.cpp"),
                    "-o", exe, "-L", bins] + ["-l:" + f for f in libs] + ["-Wl,-rpath," + bins], check=True)
    return exe, bins


def test_name(n_prompt, n_gen, n_streams, n_depth):
    """kiln bench's name of a test (as in its md table): pp512, tg64 x8 @ d4096, ..."""
    name = f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}" if n_prompt == 0 else f"pp{n_prompt}+tg{n_gen}"
    return name + (f" x{n_streams}" if n_streams > 1 else "") + (f" @ d{n_depth}" if n_depth > 0 else "")


def run_measured(cmd):
    """Runs cmd to its end: its standard output and its peak resident memory in MiB (wait4's
    ru_maxrss of that process alone)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{cmd[0]} failed ({proc.returncode}):\n{err.read().decode(errors='replace')}")
        return out.read().decode(), usage.ru_maxrss / 1024


def kiln_round(kiln, model, a):
    streams = "1" if a.streams < 2 else f"1,{a.streams}"
    out, rss = run_measured([kiln, "bench", "-m", model, "-p", str(a.p), "-n", str(a.n), "-d", str(a.d),
                             "--streams", streams, "-r", "1", "-t", str(a.threads), "-o", "json"])
    rates = {test_name(t["n_prompt"], t["n_gen"], t["n_streams"], t["n_depth"]): t["avg_ts"] for t in json.loads(out)}
    return rates, rss


def peer_round(exe, bins, model, a):
    out, rss = run_measured([exe, model, str(a.p), str(a.n), str(a.streams), str(a.threads), bins, str(a.d)])
    rates, variant = {}, "unknown"
    for line in out.splitlines():
        name, value = line.rsplit(" ", 1)
        if name == "cpu-variant":
            variant = value
        else:
            rates[name] = float(value)
    return rates, variant, rss


def compare(exe, bins, model, tests, a):
    """Runs a.rounds interleaved rounds on one model; prints its table; returns {test: median ratio}."""
    kiln_rates = {t: [] for t in tests}
    peer_rates = {t: [] for t in tests}
    ratios = {t: [] for t in tests}
    rss = {"kiln": [], "llama.cpp": [], "ratio": []}
    for r in range(a.rounds):
        k, k_rss = kiln_round(a.kiln, model, a)
        l, variant, l_rss = peer_round(exe, bins, model, a)
        rss["kiln"].append(k_rss)
        rss["llama.cpp"].append(l_rss)
        rss["ratio"].append(k_rss / l_rss)
        if r == 0:
            print(f"{os.path.basename(model)}: llama.cpp loaded ggml's CPU variant '{variant}'", flush=True)
        for t in tests:
            if t not in k or t not in l:
                sys.exit(f"round {r + 1}: test {t} missing (kiln {k}, llama.cpp {l})")
            kiln_rates[t].append(k[t])
            peer_rates[t].append(l[t])
            ratios[t].append(k[t] / l[t])
        print(f"round {r + 1}: " + ", ".join(f"{t} kiln {k[t]:.2f} / llama.cpp {l[t]:.2f} t/s" for t in tests) +
              f", peak RSS kiln {k_rss:.0f} / llama.cpp {l_rss:.0f} MiB", flush=True)
    print(f"\n| test | kiln t/s | llama.cpp t/s | kiln / llama.cpp (median of {a.rounds} rounds) |")
    print("|---|---:|---:|---:|")
    for t in tests:
        print(f"| {t} | {statistics.median(kiln_rates[t]):.2f} | {statistics.median(peer_rates[t]):.2f} | "
              f"{statistics.median(ratios[t]):.2f}x |")
    print(f"| peak RSS (MiB) | {statistics.median(rss['kiln']):.0f} | {statistics.median(rss['llama.cpp']):.0f} | "
          f"{statistics.median(rss['ratio']):.2f}x |")
    print(flush=True)
    result = {t: statistics.median(ratios[t]) for t in tests}
    result["peak RSS"] = statistics.median(rss["ratio"])
    return result


def weight_type(model):
    """The weight type a file's name ends with (llama-1.1b-q4_k_m.gguf: Q4_K_M), else the name."""
    m = re.search(r"[-.]((?:[qQ]\d_[kK](?:_[smlSML])?)|(?:[qQ]\d_\d)|(?:i?[qQ]\d_[a-zA-Z]+\d*)|(?:[bB]?[fF]\d+))\.gguf$",
                  model)
    return m.group(1).upper() if m else os.path.basename(model)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kiln")
    p.add_argument("models", nargs="+", metavar="model")
    p.add_argument("--node-modules", required=True)
    p.add_argument("-p", type=int, default=512)
    p.add_argument("-n", type=int, default=64)
    p.add_argument("-d", type=int, default=0, help="tokens in the KV cache before each test (depth)")
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    exe, bins = build_peer(os.path.abspath(a.node_modules))
    # -p 0 or -n 0 drops that test (both sides skip it), as in llama-bench.
    tests = ([test_name(a.p, 0, 1, a.d)] if a.p > 0 else []) + ([test_name(0, a.n, 1, a.d)] if a.n > 0 else [])
    tests += [test_name(0, a.n, a.streams, a.d)] if a.n > 0 and a.streams > 1 else []
    summary = [(weight_type(m), compare(exe, bins, m, tests, a)) for m in a.models]
    if len(summary) > 1:
        columns = tests + ["peak RSS"]
        print(f"| type | " + " | ".join(columns) + " |")
        print("|---|" + "---:|" * len(columns))
        for name, ratio in summary:
            print(f"| {name} | " + " | ".join(f"{ratio[t]:.2f}x" for t in columns) + " |")


if __name__ == "__main__":
    main()
