#!/usr/bin/python3
"""Shrink an mtmd_oracle output (tools/fixtures/mtmd_oracle.c: OUT.json, OUT.embd.f32) into what
kiln's vision conformance test reads: NAME.ref.json (prompt, mode, chunk layout and token ids,
image embedding shape, the top 40 last-position logits, greedy tokens) and NAME.embd.f32 (the
image embeddings, token-major float32, copied unchanged).

  compact_ref.py ORACLE_OUT_PREFIX NAME
"""
import json
import shutil
import sys

src, name = sys.argv[1], sys.argv[2]
d = json.load(open(src + ".json"))
logits = d["logits"]
top = sorted(range(len(logits)), key=lambda i: -logits[i])[:40]
ref = {
    "prompt": d["prompt"],
    "mode": d["mode"],
    "image": d["image"].split("/")[-1],
    "image_nx": d["image_nx"],
    "image_ny": d["image_ny"],
    "chunks": [{k: v for k, v in c.items() if k != "pieces"} for c in d["chunks"]],
    "n_past": d["n_past"],
    "image_embd_shape": d["image_embd_shape"],
    "logits_top": [[i, logits[i]] for i in top],
    "greedy_tokens": d["greedy_tokens"],
}
with open(name + ".ref.json", "w") as f:  # one key per line, values compact
    f.write("{\n" + ",\n".join(json.dumps(k) + ": " + json.dumps(v) for k, v in ref.items()) + "\n}\n")
shutil.copyfile(src + ".embd.f32", name + ".embd.f32")
print("wrote", name + ".ref.json", name + ".embd.f32")
