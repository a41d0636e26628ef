#!/usr/bin/python3
"""A repeat turn of a long conversation after its model was evicted, against a new process (issue 11).

  bench/repeat_turn.py KILN BIG.gguf OTHER.gguf [--tokens 2000] [--ctx 4096] [--rounds 3] [--threads 2]

Each round, side by side:
  restored  one `kiln serve -m big=BIG -m other=OTHER -np 1 -c CTX` with a CPU budget that holds big
            and not other beside it: a conversation of about TOKENS prompt tokens on big, then a
            request for other (which evicts big's weights and arena), then the conversation's next
            turn on big, timed from the request to its answer: big's memory comes back from the
            mapped file and only the new tokens are decoded (its KV cache stayed, timings.prompt_n);
  new       a fresh `kiln serve -m BIG -np 1 -c CTX` timed from its start to its answer to that
            same next turn (the whole prompt prefilled), as a proxy that restarts its model does.
The budget is the sum of the two models' counted bytes (a calibration server with no budget, GET
/v1/memory) less half of other's. Both answers must be the same text (greedy). Prints each round's
seconds and the median of the per-round ratios new / restored (the issue asks for at least 20).
Run it at high priority on a busy machine (as root: `echo -20 > /proc/self/autogroup`). Standard
library only.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_server import LlamaServer  # noqa: E402


def long_prompt(tokens):
    """About `tokens` tokens of English words (the random-words prompt repeated)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts", "random-words-200.txt")
    words = open(path).read().split()
    out = []
    while len(out) < tokens * 3 // 4:  # about 4/3 tokens per word with a llama vocabulary
        out.extend(words)
    return " ".join(out[: tokens * 3 // 4])


def complete(server, model, prompt, n=16):
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0}
    if model:
        body["model"] = model
    r = server.request("/v1/completions", body)
    return r["choices"][0]["text"], r["timings"]["prompt_n"], r["usage"]["prompt_tokens"]


def owner_bytes(memory, name):
    for d in memory["devices"]:
        if d["device"] != "cpu":
            continue
        for o in d["owners"]:
            if o["name"] == name:
                return o["weights"] + o["kv"] + o["compute"] + o["scratch"]
    sys.exit("no owner %s in /v1/memory" % name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kiln")
    ap.add_argument("big")
    ap.add_argument("other")
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    common = ["-c", str(a.ctx), "-np", "1", "-t", str(a.threads)]
    many = ["-m", "big=" + a.big, "-m", "other=" + a.other, "--models-max", "0"] + common
    prompt = long_prompt(a.tokens)

    with LlamaServer(a.kiln, ["serve"] + many) as s:
        complete(s, "big", "Hello", 1)
        complete(s, "other", "Hello", 1)
        memory = s.request("/v1/memory")
    # The two models' owners on the CPU (the scratch owners hold no weights): big is the larger.
    owners = sorted(((owner_bytes(memory, o["name"]), o["name"]) for d in memory["devices"] if d["device"] == "cpu"
                     for o in d["owners"] if o["weights"] > 0), reverse=True)
    if len(owners) != 2:
        sys.exit("expected two models on the CPU in /v1/memory, found %s" % owners)
    (big_bytes, big_name), (other_bytes, other_name) = owners
    budget_gib = (big_bytes + other_bytes // 2) / 2**30
    print("big %s: %.1f MiB, other %s: %.1f MiB counted; budget cpu=%.4f GiB" %
          (big_name, big_bytes / 2**20, other_name, other_bytes / 2**20, budget_gib))

    ratios = []
    for r in range(a.rounds):
        with LlamaServer(a.kiln, ["serve"] + many + ["--max-mem", "cpu=%.4f" % budget_gib]) as s:
            first, _, n_first = complete(s, "big", prompt)
            complete(s, "other", "Hello there")
            states = {m["id"]: m["status"]["value"] for m in s.request("/v1/models")["data"]}
            if states["big"] != "sleeping":
                sys.exit("big was not evicted by other (states %s): lower the budget" % states)
            follow = prompt + first + " And then"
            t0 = time.monotonic()
            restored_text, prompt_n, n_prompt = complete(s, "big", follow)
            restored = time.monotonic() - t0
        t0 = time.monotonic()
        with LlamaServer(a.kiln, ["serve", "-m", a.big] + common) as s:
            new_text, new_prompt_n, _ = complete(s, None, follow)
            new = time.monotonic() - t0
        if new_text != restored_text:
            sys.exit("the answers differ: %r against %r" % (restored_text, new_text))
        ratios.append(new / restored)
        print("round %d: prompt %d tokens (first turn %d); restored %.2f s (prompt_n %d), new process %.2f s "
              "(prompt_n %d): %.1fx" % (r + 1, n_prompt, n_first, restored, prompt_n, new, new_prompt_n, new / restored))
    print("median new / restored: %.1fx over %d rounds" % (statistics.median(ratios), len(ratios)))


if __name__ == "__main__":
    main()
