#!/usr/bin/python3
"""Speculative decoding speed: kiln and llama.cpp, each with and without speculation, same files.

  bench/compare_speculative.py KILN TARGET.gguf --llama-bin DIR [--spec "SPEC FLAGS"]
                               [--prompt TEXT | --prompt-file FILE] [-n 128] [--rounds 3] [--threads 2]

SPEC FLAGS are llama.cpp's (and kiln's) flags, e.g. "-md draft.gguf --spec-type draft-simple
--spec-draft-n-max 16" or "--spec-type ngram-simple". Each round runs, in turn: `kiln run` without
and with them, then llama.cpp's llama-server without and with them (a fresh server for each
/completion request: a slot's n-gram state outlives a request there), and llama.cpp's
llama-speculative-simple when a draft model is given. Every run generates N tokens greedily after the prompt (end-of-generation ignored);
rates are generation only (tokens after the first / their time, as each tool reports it). The
table gives median tokens/s and the median over rounds of each ratio; the outputs of each engine
with and without speculation must be the same text. Run it at high priority on a busy machine
(e.g. as root: `echo -20 > /proc/self/autogroup; nice -n -20 ...`). Standard library only.
"""
import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys

from llama_server import LlamaServer


def run_kiln(kiln, model, prompt, n, threads, ctx, spec):
    cmd = [kiln, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--ignore-eos", "-t", str(threads),
           "-c", str(ctx), "--no-display-prompt"] + spec
    p = subprocess.run(cmd, capture_output=True)
    stderr = p.stderr.decode(errors="replace")
    if p.returncode != 0:
        sys.exit("kiln failed: %s\n%s" % (" ".join(cmd), stderr))
    m = re.search(r"generated (\d+) tokens in ([\d.]+) s \(([\d.]+) t/s\)", stderr)
    s = re.search(r"speculative: drafted (\d+), accepted (\d+)", stderr)
    return {"tps": float(m.group(3)), "text": p.stdout, "drafted": int(s.group(1)) if s else 0,
            "accepted": int(s.group(2)) if s else 0}


def run_speculative_simple(binary, model, prompt, n, threads, ctx, spec):
    cmd = [binary, "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", str(threads), "-c", str(ctx),
           "--ignore-eos"] + spec
    p = subprocess.run(cmd, capture_output=True)
    out = (p.stdout + p.stderr).decode(errors="replace")
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", out)
    if p.returncode != 0 or not m:
        sys.exit("llama-speculative-simple failed: %s\n%s" % (" ".join(cmd), out[-3000:]))
    d = re.search(r"n_drafted\s*=\s*(\d+)", out)
    a = re.search(r"n_accept\s*=\s*(\d+)", out)
    return {"tps": float(m.group(3)), "drafted": int(d.group(1)) if d else 0, "accepted": int(a.group(1)) if a else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kiln")
    ap.add_argument("target")
    ap.add_argument("--llama-bin", required=True, help="folder with llama-server and llama-speculative-simple")
    ap.add_argument("--spec", default="", help="speculative flags, as one string")
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog.")
    ap.add_argument("--prompt-file")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    a = ap.parse_args()
    prompt = open(a.prompt_file).read() if a.prompt_file else a.prompt
    spec = shlex.split(a.spec)
    has_draft = "-md" in spec or "--spec-draft-model" in spec

    def run_server(flags):
        args = ["-m", a.target, "-np", "1", "-c", str(a.ctx), "-t", str(a.threads), "--no-warmup"] + flags
        with LlamaServer(os.path.join(a.llama_bin, "llama-server"), args) as server:
            r = server.request("/completion", {"prompt": prompt, "n_predict": a.n, "temperature": 0,
                                               "ignore_eos": True, "cache_prompt": False})
        t = r["timings"]
        return {"tps": t["predicted_per_second"], "text": r["content"], "drafted": t.get("draft_n", 0),
                "accepted": t.get("draft_n_accepted", 0)}

    runs = {k: [] for k in ("kiln", "kiln spec", "llama.cpp", "llama.cpp spec", "llama-speculative-simple")}
    for r in range(a.rounds):
        runs["kiln"].append(run_kiln(a.kiln, a.target, prompt, a.n, a.threads, a.ctx, []))
        runs["kiln spec"].append(run_kiln(a.kiln, a.target, prompt, a.n, a.threads, a.ctx, spec))
        runs["llama.cpp"].append(run_server([]))
        runs["llama.cpp spec"].append(run_server(spec))
        if has_draft:
            runs["llama-speculative-simple"].append(
                run_speculative_simple(a.llama_bin + "/llama-speculative-simple", a.target, prompt, a.n, a.threads,
                                       a.ctx, spec))
        print("round %d/%d: %s" % (r + 1, a.rounds, ", ".join(
            "%s %.2f" % (k, v[-1]["tps"]) for k, v in runs.items() if v)), file=sys.stderr)

    same_kiln = all(x["text"] == y["text"] for x, y in zip(runs["kiln"], runs["kiln spec"]))
    same_llama = all(x["text"] == y["text"] for x, y in zip(runs["llama.cpp"], runs["llama.cpp spec"]))

    def ratio(num, den):
        return statistics.median(x["tps"] / y["tps"] for x, y in zip(runs[num], runs[den]))

    print("target %s, spec flags '%s', %d tokens, %d threads, %d rounds (interleaved)\n" %
          (a.target, a.spec, a.n, a.threads, a.rounds))
    print("| run | t/s (median) | drafted / accepted (last round) |\n|---|---:|---:|")
    for k, v in runs.items():
        if v:
            print("| %s | %.2f | %d / %d |" % (k, statistics.median(x["tps"] for x in v), v[-1]["drafted"],
                                              v[-1]["accepted"]))
    print("\nkiln spec / kiln: %.2fx (same text: %s)" % (ratio("kiln spec", "kiln"), "yes" if same_kiln else "NO"))
    print("llama.cpp spec / llama.cpp: %.2fx (same text: %s)" %
          (ratio("llama.cpp spec", "llama.cpp"), "yes" if same_llama else "NO"))
    print("kiln spec / llama.cpp spec: %.2fx" % ratio("kiln spec", "llama.cpp spec"))
    if has_draft:
        print("llama-speculative-simple / llama.cpp: %.2fx; kiln spec / llama-speculative-simple: %.2fx" %
              (ratio("llama-speculative-simple", "llama.cpp"), ratio("kiln spec", "llama-speculative-simple")))
    print("kiln / llama.cpp (no speculation): %.2fx" % ratio("kiln", "llama.cpp"))


if __name__ == "__main__":
    main()
