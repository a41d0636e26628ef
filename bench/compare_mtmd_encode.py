#!/usr/bin/python3
"""kiln against llama.cpp's libmtmd encoding one image with the same mmproj: milliseconds per encode.

  bench/compare_mtmd_encode.py KILN_BINARY LLAMA_CPP_DIR TEXT.gguf MMPROJ.gguf IMAGE
                               [--rounds 3] [--reps 3] [--threads 2] [--flash on|off]

LLAMA_CPP_DIR: a llama.cpp source tree built with cmake into LLAMA_CPP_DIR/build (libmtmd,
libllama), e.g. the release node-llama-cpp@3.22.1 bundles. bench/mtmd_peer.c is compiled against
it into build/mtmd_peer/. Rounds alternate kiln (`kiln bench --mmproj --image -p 0 -n 0 -r REPS`)
and llama.cpp (REPS encodes after a warm-up), same files, threads and attention path; the table
gives each side's median ms per encode over all runs and the median over rounds of the ratio of
the rounds' medians (kiln / llama.cpp: below 1 is faster). Image preprocessing is timed on both
sides (llama.cpp does it in mtmd_tokenize, outside its timing; kiln's is in its encode).
Standard library only (plus gcc).
"""
import argparse
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_peer(lcpp):
    out_dir = os.path.join(ROOT, "build", "mtmd_peer")
    os.makedirs(out_dir, exist_ok=True)
    exe = os.path.join(out_dir, "mtmd_peer")
    lib = os.path.join(lcpp, "build", "bin")
    subprocess.run(["gcc", "-O2", "-std=c11", os.path.join(ROOT, "bench", "mtmd_peer.c"), "-o", exe,
                    "-I", os.path.join(lcpp, "include"), "-I", os.path.join(lcpp, "ggml", "include"),
                    "-I", os.path.join(lcpp, "tools", "mtmd"), "-L", lib, "-lmtmd", "-lllama", "-lggml",
                    "-lggml-base", "-Wl,-rpath," + lib], check=True)
    return exe


def kiln_round(a):
    out = subprocess.run([a.kiln, "bench", "-m", a.text, "--mmproj", a.mmproj, "--image", a.image, "-p", "0",
                          "-n", "0", "-r", str(a.reps), "-t", str(a.threads), "-fa", a.flash],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"\|\s*img \d+x\d+\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\.\.\s*([\d.]+)\s*\|\s*([\d.]+) ms", out)
    if not m:
        raise SystemExit("no img line in kiln bench's output:\n" + out)
    return float(m.group(4))


def peer_round(exe, a):
    out = subprocess.run([exe, a.text, a.mmproj, a.image, str(a.reps), str(a.threads),
                          "1" if a.flash == "on" else "0"], check=True, capture_output=True, text=True).stdout
    return statistics.median(float(x) for x in re.findall(r"encode_ms ([\d.]+)", out))


def main():
    p = argparse.ArgumentParser()
    for name in ("kiln", "lcpp", "text", "mmproj", "image"):
        p.add_argument(name)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--flash", default="on", choices=["on", "off"])
    a = p.parse_args()
    exe = build_peer(os.path.abspath(a.lcpp))
    kiln_ms, peer_ms = [], []
    for r in range(a.rounds):
        kiln_ms.append(kiln_round(a))
        peer_ms.append(peer_round(exe, a))
        print(f"round {r + 1}: kiln {kiln_ms[-1]:.0f} ms, llama.cpp {peer_ms[-1]:.0f} ms", flush=True)
    ratios = [k / l for k, l in zip(kiln_ms, peer_ms)]
    print(f"\n| encode | kiln ms (median) | llama.cpp ms (median) | kiln / llama.cpp (median of rounds) |")
    print(f"|---|---:|---:|---:|")
    print(f"| {os.path.basename(a.mmproj)}, {os.path.basename(a.image)}, flash {a.flash} | "
          f"{statistics.median(kiln_ms):.0f} | {statistics.median(peer_ms):.0f} | {statistics.median(ratios):.2f} |")


if __name__ == "__main__":
    main()
