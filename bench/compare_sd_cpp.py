#!/usr/bin/python3
"""kiln against stable-diffusion.cpp: one evaluation of a full-size SD 1.5 UNet (random weights,
real shapes) at SIDE x SIDE pixels, F16 and Q8_0, and one VAE decode of a SIDE x SIDE image, on
the same machine and threads.

  bench/compare_sd_cpp.py --sdcpp SRC --sdcpp-build BUILD [--work DIR] [--side 512] [--rounds 3]
                          [--threads 2] [--types f16,q8_0] [--evals 2] [--nets unet,vae]

SRC is a stable-diffusion.cpp source tree with its ggml submodule, BUILD its CMake build folder
with the library built (as tools/fixtures/mksdcpp_clip_refs.sh says); bench/sdcpp_network_peer.cpp
is compiled against them into DIR (default build/sdcpp_peer). The test UNet is
tools/fixtures/mksd_unet.py at 320 channels (SD 1.5's 860M parameters, F32, made once into DIR),
converted by stable-diffusion.cpp's own `convert` into one GGUF per type, so that both programs
read the same bytes (its rules: F16 turns every weight to F16; Q8_0 quantizes the linear weights
and 1-D gains, and keeps conv kernels F32, which both programs then hold as F16). The VAE is
tools/fixtures/mksd_vae.py's (SD 1.x's AutoencoderKL at full size, F16 convs, as a --vae file).

Rounds alternate kiln (build/release/sd_network_speed) and stable-diffusion.cpp with the same
file, size, inputs and threads. Each process loads the UNet and evaluates it EVALS times; the
table gives each side's median time of its first evaluation (it plans the graph and sizes the
compute buffers; kiln's also faults the mapped weights in), of its last (a step of a generation),
and its peak RSS (wait4's ru_maxrss: mapped file pages count while resident), and the median of
the per-round ratios. The last column is ||kiln - sd.cpp|| / ||sd.cpp|| over the last round's
outputs, to show that both computed the same thing.
Standard library only (plus g++).
"""
import argparse
import array
import math
import os
import statistics
import subprocess
import sys

from compare_llama_cpp import ROOT, run_measured


def build_peer(src, build, work):
    libs = [os.path.join(d, f) for d, _, fs in os.walk(build) for f in fs if f == "libstable-diffusion.a"]
    ggml = sorted((os.path.join(d, f) for d, _, fs in os.walk(build) for f in fs
                   if f.startswith("libggml") and f.endswith(".a")), reverse=True)
    if not libs or not ggml:
        sys.exit(f"{build}: no libstable-diffusion.a or libggml*.a: build stable-diffusion.cpp's library first")
    exe = os.path.join(work, "sdcpp_network_peer")
    includes = [os.path.join(src, d) for d in ("src", "include", os.path.join("ggml", "include"), "thirdparty")]
    subprocess.run(["g++", "-std=c++17", "-O2", "-DNDEBUG", "-DGGML_MAX_NAME=160"] +
                   [f"-I{d}" for d in includes + [os.path.join(ROOT, "tests")]] +
                   ["-o", exe, os.path.join(ROOT, "bench", "sdcpp_network_peer.cpp"), libs[0],
                    "-Wl,--start-group"] + ggml + ["-Wl,--end-group", "-fopenmp", "-lpthread"], check=True)
    return exe


def make_models(peer, work, types, nets):
    """(network, label, file) cases: the F32 test UNet converted by stable-diffusion.cpp to one GGUF
    per type, and the test VAE (those of `nets`)."""
    fixtures = os.path.join(ROOT, "tools", "fixtures")
    f32 = os.path.join(work, "unet-sd15-f32.safetensors")
    if not os.path.exists(f32):
        subprocess.run(["/usr/bin/python3", os.path.join(fixtures, "mksd_unet.py"), "--channels", "320",
                        "--out", f32], check=True)
    cases = []
    for t in types if "unet" in nets else []:
        path = os.path.join(work, f"unet-sd15-{t}.gguf")
        if not os.path.exists(path):
            subprocess.run([peer, "convert", f32, path, t], check=True, stdout=subprocess.DEVNULL)
        cases.append(("unet", t, path))
    if "vae" not in nets:
        return cases
    vae = os.path.join(work, "vae-sd1-f16.safetensors")
    if not os.path.exists(vae):
        subprocess.run(["/usr/bin/python3", os.path.join(fixtures, "mksd_vae.py"), "--seed", "37", "--out", vae],
                       check=True)
    cases.append(("vae", "f16 convs", vae))
    return cases


def parse(out):
    """The eval_ms lines, in order."""
    evals = [float(line.split()[1]) for line in out.splitlines() if line.startswith("eval_ms ")]
    if not evals:
        sys.exit(f"no timings in:\n{out}")
    return evals


def relative_l2(path, ref_path):
    a, b = array.array("f"), array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    with open(ref_path, "rb") as f:
        b.frombytes(f.read())
    if len(a) != len(b):
        sys.exit(f"{path} and {ref_path} hold {len(a)} and {len(b)} floats")
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(y * y for y in b))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdcpp", required=True)
    ap.add_argument("--sdcpp-build", required=True)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "sdcpp_peer"))
    ap.add_argument("--kiln-bench", default=os.path.join(ROOT, "build", "release", "sd_network_speed"))
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--evals", type=int, default=2)
    ap.add_argument("--types", default="f16,q8_0")
    ap.add_argument("--nets", default="unet,vae", help="which networks: unet, vae or both")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    peer = build_peer(a.sdcpp, a.sdcpp_build, a.work)
    cases = make_models(peer, a.work, a.types.split(","), a.nets.split(","))
    args = [str(a.side), str(a.threads), str(a.evals)]
    print(f"| {a.side}x{a.side}, {a.threads} threads | kiln first / last eval s | sd.cpp first / last eval s "
          "| last eval kiln / sd.cpp (speed) | kiln RSS / sd.cpp RSS MiB | outputs' relative L2 |")
    print("|---|---|---|---:|---|---|")
    for net, t, path in cases:
        rounds = []
        k_dump, p_dump = os.path.join(a.work, "kiln.out"), os.path.join(a.work, "sdcpp.out")
        for r in range(a.rounds):
            k_out, k_rss = run_measured([a.kiln_bench, net, path] + args + [k_dump])
            p_out, p_rss = run_measured([peer, net, path] + args + [p_dump])
            k_evals, p_evals = parse(k_out), parse(p_out)
            rounds.append((k_evals, p_evals, k_rss, p_rss))
            print(f"  {net} {t} round {r + 1}: kiln {k_evals} ms, {k_rss:.0f} MiB; sd.cpp {p_evals} ms, {p_rss:.0f} MiB",
                  file=sys.stderr)
        med = lambda f: statistics.median(f(x) for x in rounds)  # noqa: E731
        print(f"| {net} {t} | {med(lambda x: x[0][0]) / 1000:.2f} / {med(lambda x: x[0][-1]) / 1000:.2f} "
              f"| {med(lambda x: x[1][0]) / 1000:.2f} / {med(lambda x: x[1][-1]) / 1000:.2f} "
              f"| {med(lambda x: x[1][-1] / x[0][-1]):.2f}x "
              f"| {med(lambda x: x[2]):.0f} / {med(lambda x: x[3]):.0f} "
              f"| {relative_l2(k_dump, p_dump):.1e} |")


if __name__ == "__main__":
    main()
