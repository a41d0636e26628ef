"""Writes the small rope-variant models of tests/conformance/data (run by make_rope_refs.sh):
  llama-ropefreqs.gguf: a llama with Llama-3.1-style per-dimension frequency factors
                        (rope_freqs.weight) and a 2048-token context, for prompts past 1000 tokens;
  qwen2-yarn.gguf:      a qwen2 with YaRN scaling (factor 4 over an original context of 32).
Both use the byte-level vocabulary tests/data/quant/vocab512.gguf and random weights from
tools/fixtures/mkmodel.py. Usage: make_rope_models.py OUT_DIR (run with /usr/bin/python3).
"""
import math
import os
import subprocess
import sys

out = sys.argv[1]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
tools = os.path.join(root, "tools", "fixtures")
sys.path.insert(0, tools)
import gguf_lite as g  # noqa: E402


def mkmodel(path, arch, ctx):
    subprocess.run([sys.executable, os.path.join(tools, "mkmodel.py"),
                    "--vocab", os.path.join(root, "tests", "data", "quant", "vocab512.gguf"), "--out", path,
                    "--arch", arch, "--embd", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                    "--ff", "128", "--ctx", str(ctx), "--seed", "7"], check=True)


def rewrite(src, dst, extra_kv, extra_tensors):
    r = g.Reader(src)
    w = g.Writer(dst)
    for key, (t, v, et) in r.kv.items():
        w.add(key, t, v, et)
    for key, t, v in extra_kv:
        w.add(key, t, v)
    ends = [off for (_, _, _, off) in r.tensors[1:]]
    for i, (name, dims, gt, off) in enumerate(r.tensors):
        n = 1
        for d in dims:
            n *= d
        size = {g.GGML_F32: 4 * n, g.GGML_F16: 2 * n}[gt]
        start = r.data_start + off
        w.add_tensor(name, dims, gt, r.buf[start:start + size])
    for name, dims, data in extra_tensors:
        w.add_tensor(name, dims, g.GGML_F32, data)
    w.write()
    os.remove(src)


def llama31_factors(head_dim, base, factor=8.0, low=1.0, high=4.0, orig_ctx=64):
    """Frequency factors as Llama 3.1's rope scaling defines them (over a small original context)."""
    import struct
    out = []
    low_wavelen, high_wavelen = orig_ctx / low, orig_ctx / high
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return struct.pack("<%df" % len(out), *out)


os.makedirs(out, exist_ok=True)
tmp = os.path.join(out, "tmp.gguf")
mkmodel(tmp, "llama", 2048)
rewrite(tmp, os.path.join(out, "llama-ropefreqs.gguf"), [],
        [("rope_freqs.weight", [8], llama31_factors(16, 10000.0))])
mkmodel(tmp, "qwen2", 128)
rewrite(tmp, os.path.join(out, "qwen2-yarn.gguf"),
        [("qwen2.rope.scaling.type", g.T_STR, "yarn"), ("qwen2.rope.scaling.factor", g.T_F32, 4.0),
         ("qwen2.rope.scaling.original_context_length", g.T_U32, 32)], [])
