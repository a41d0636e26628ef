#!/usr/bin/python3
"""Trains kiln's default model: a small llama-architecture decoder with a SentencePiece vocabulary
(BPE, byte_fallback, so llama.cpp's SPM tokenizer reads it) on the King James Bible, and saves it
as a Hugging Face folder (config.json, model.safetensors, tokenizer.model, tokenizer_config.json,
generation_config.json) plus a loss curve, RESULTS.md and reference logits for tests/convert.

Runs on CPU with a fixed thread count. A checkpoint (the full HF folder, RESULTS.md marked
partial) is written every --checkpoint-every steps, so an interrupted run is still usable.

    nice -n 19 /usr/bin/python3 tools/train/train.py   (see RESULTS.md for the exact command)
"""
import argparse
import json
import math
import os
import random
import shlex
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import export  # noqa: E402
from model import LlamaConfig, LlamaForCausalLM  # noqa: E402

PROMPTS = [
    "In the beginning God created",
    "And the LORD said unto Moses,",
    "Blessed are the",
    "The LORD is my shepherd;",
    "Jesus wept. And",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="models/kjv-llama", help="the Hugging Face folder to write")
    p.add_argument("--ref-out", default="tests/convert/data/kjv_llama_ref.json")
    p.add_argument("--results", default="tools/train/RESULTS.md")
    p.add_argument("--work", default="build/train", help="scratch: corpus text, sentencepiece files")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=768)
    p.add_argument("--ctx", type=int, default=256, help="training window = max_position_embeddings")
    p.add_argument("--tie", action="store_true", help="tie the output projection to the embeddings")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--checkpoint-every", type=int, default=250)
    p.add_argument("--max-minutes", type=float, default=50.0, help="stop (and save) after this wall time")
    p.add_argument("--init-from", default="", help="continue from a checkpoint.pt of an earlier run with the same "
                   "shape: its weights, step count, loss curves and commands; a fresh optimizer warms up again")
    return p.parse_args()


def train_tokenizer(args, train_lines):
    os.makedirs(args.work, exist_ok=True)
    text_path = os.path.join(args.work, "kjv_train.txt")
    with open(text_path, "w") as f:
        f.write("\n".join(train_lines) + "\n")
    prefix = os.path.join(args.work, "kjv_spm")
    # Settings as llama's tokenizer.model: BPE, byte fallback, identity normalization (llama.cpp
    # does not normalize), a dummy "▁" prefix, digits split, <unk>=0 <s>=1 </s>=2, no pad.
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=prefix, vocab_size=args.vocab, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=args.threads, minloglevel=2)
    return prefix + ".model"


def encode_stream(sp, lines, bos, eos):
    """Each verse as one document: <s> verse </s>, concatenated."""
    out = []
    for ids in sp.encode(lines):
        out.append(bos)
        out.extend(ids)
        out.append(eos)
    return torch.tensor(out, dtype=torch.long)


def lr_at(step, args, first_step=0):
    """Linear warmup from the run's first step, then constant: the schedule does not depend on
    --steps, so a run stopped by --max-minutes after N steps is reproduced exactly by the same
    command with --steps N."""
    return args.lr * min(1.0, (step - first_step + 1) / args.warmup)


@torch.no_grad()
def evaluate(model, stream, ctx, n_windows=24):
    """Mean next-token loss over n_windows evenly spaced windows (deterministic)."""
    model.eval()
    starts = np.linspace(0, len(stream) - ctx - 2, n_windows).astype(np.int64)
    x = torch.stack([stream[s : s + ctx] for s in starts])
    y = torch.stack([stream[s + 1 : s + ctx + 1] for s in starts])
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    model.train()
    return loss


def plot_losses(path, train_curve, valid_curve):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    if train_curve:
        s, l = zip(*train_curve)
        ax.plot(s, l, label="train (mean of 10 steps)", lw=1)
    if valid_curve:
        s, l = zip(*valid_curve)
        ax.plot(s, l, "o-", label="validation (Jude, Revelation)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("kjv-llama training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_results(args, info):
    lines = [
        "# kjv-llama: training results",
        "",
        "Written by tools/train/train.py" + (" (PARTIAL: checkpoint of an unfinished run)" if info["partial"] else "") + ".",
        "",
        "Reproduce (from the repository root, after `tools/train/setup.sh`)"
        + (", running these commands one after the other:" if len(info["commands"]) > 1 else ":"),
        "",
        "```",
        *info["commands"],
        "```",
        "",
        f"- seed: {args.seed}; torch {torch.__version__}, sentencepiece {spm.__version__}, {args.threads} CPU threads",
        f"- corpus: {corpus.DESCRIPTION}",
        f"- tokens: {info['n_train_tokens']} train, {info['n_valid_tokens']} validation (each verse as `<s> verse </s>`)",
        f"- vocabulary: SentencePiece BPE, {args.vocab} pieces, byte_fallback, identity normalization",
        f"- model: llama, hidden {args.dim}, {args.layers} layers, {args.heads} heads ({args.kv_heads} KV heads), "
        f"FFN {args.ff}, context {args.ctx}, {'tied' if args.tie else 'untied'} output, {info['n_params']} parameters",
        f"- optimizer: AdamW (betas 0.9/0.95, weight decay 0.1), lr {args.lr} after {args.warmup} warmup steps, constant, "
        f"batch {args.batch} x {args.ctx} tokens",
        f"- steps: {info['step']}" + (f" (of {args.steps} planned; stopped by --max-minutes {args.max_minutes})"
                                       if info["step"] < args.steps else "")
        + (f"; the last command continued from step {info['first_step']} (--init-from) with a fresh optimizer"
           if info["first_step"] else ""),
        f"- final train loss (mean of last 10 steps): {info['train_loss']:.4f}",
        f"- final validation loss: {info['valid_loss']:.4f} nats/token (perplexity {math.exp(info['valid_loss']):.2f})",
        f"- wall time: {info['wall_s'] / 60:.1f} min (training loop {info['train_s'] / 60:.1f} min)"
        + (" for the last command" if len(info["commands"]) > 1 else ""),
        "",
        "![loss curve](loss_curve.png)",
        "",
        "Greedy continuations of the reference prompts (PyTorch, float64):",
        "",
    ]
    for s in info["samples"]:
        lines.append(f"- `{s}`")
    lines.append("")
    with open(args.results, "w") as f:
        f.write("\n".join(lines))


def main():
    t_start = time.time()
    args = parse_args()
    def repro_command(steps_done):
        """This run's command line with --steps set to the steps actually done."""
        argv = list(sys.argv)
        if "--steps" in argv:
            argv[argv.index("--steps") + 1] = str(steps_done)
        else:
            argv += ["--steps", str(steps_done)]
        return "nice -n 19 /usr/bin/python3 " + " ".join(shlex.quote(a) for a in argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)

    train_lines = corpus.verses(corpus.TRAIN_RANGE)
    valid_lines = corpus.verses(corpus.VALID_RANGE)
    sp_path = train_tokenizer(args, train_lines)
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    special = {"unk": (sp.unk_id(), sp.id_to_piece(sp.unk_id())),
               "bos": (sp.bos_id(), sp.id_to_piece(sp.bos_id())),
               "eos": (sp.eos_id(), sp.id_to_piece(sp.eos_id()))}
    train_stream = encode_stream(sp, train_lines, sp.bos_id(), sp.eos_id())
    valid_stream = encode_stream(sp, valid_lines, sp.bos_id(), sp.eos_id())
    print(f"tokens: train {len(train_stream)}, valid {len(valid_stream)}", flush=True)

    cfg = LlamaConfig(vocab_size=sp.vocab_size(), hidden_size=args.dim, intermediate_size=args.ff,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=args.ctx,
                      tie_word_embeddings=args.tie, bos_token_id=sp.bos_id(), eos_token_id=sp.eos_id())
    model = LlamaForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)

    plot_path = os.path.join(os.path.dirname(args.results), "loss_curve.png")
    train_curve, valid_curve, window = [], [], []
    step, first_step, prior_commands = 0, 0, []
    if args.init_from:
        ck = torch.load(args.init_from)
        if ck["config"] != cfg.__dict__:
            sys.exit(f"--init-from {args.init_from}: its model shape {ck['config']} differs from {cfg.__dict__}")
        model.load_state_dict(ck["model"])
        step = first_step = ck["step"]
        train_curve, valid_curve = list(ck.get("train_curve", [])), list(ck.get("valid_curve", []))
        prior_commands = list(ck.get("commands", []))
        gen.manual_seed(args.seed + first_step)  # batches other than the first run's
        print(f"continuing from {args.init_from} at step {step}", flush=True)
    t_train = time.time()

    def checkpoint(step, partial):
        valid_loss = evaluate(model, valid_stream, args.ctx)
        valid_curve.append((step, valid_loss))
        commands = prior_commands + [repro_command(step)]
        torch.save({"step": step, "model": model.state_dict(), "config": cfg.__dict__, "train_curve": train_curve,
                    "valid_curve": valid_curve, "commands": commands}, os.path.join(args.work, "checkpoint.pt"))
        export.save_hf_folder(model, sp_path, args.out, special)
        refs = export.reference_logits(model, sp, PROMPTS)
        os.makedirs(os.path.dirname(args.ref_out), exist_ok=True)
        with open(args.ref_out, "w") as f:
            json.dump({"model": args.out, "bos": sp.bos_id(), "eos": sp.eos_id(), "prompts": refs}, f)
            f.write("\n")
        plot_losses(plot_path, train_curve, valid_curve)
        samples = [r["text"] + " → " + repr(sp.decode(r["greedy"])) for r in refs]
        write_results(args, {
            "partial": partial, "commands": commands, "first_step": first_step, "n_params": n_params, "step": step,
            "n_train_tokens": len(train_stream), "n_valid_tokens": len(valid_stream),
            "train_loss": train_curve[-1][1] if train_curve else float("nan"), "valid_loss": valid_loss,
            "wall_s": time.time() - t_start, "train_s": time.time() - t_train, "samples": samples})
        print(f"checkpoint step {step}: valid {valid_loss:.4f} ({time.time() - t_start:.0f}s)", flush=True)

    model.train()
    while step < args.steps:
        if (time.time() - t_start) / 60 > args.max_minutes:
            print(f"stopping at step {step}: --max-minutes {args.max_minutes} reached", flush=True)
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args, first_step)
        starts = torch.randint(0, len(train_stream) - args.ctx - 1, (args.batch,), generator=gen)
        x = torch.stack([train_stream[s : s + args.ctx] for s in starts])
        y = torch.stack([train_stream[s + 1 : s + args.ctx + 1] for s in starts])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        window.append(loss.item())
        if len(window) == 10:
            train_curve.append((step, sum(window) / 10))
            window = []
            el = time.time() - t_train
            print(f"step {step}/{args.steps} loss {train_curve[-1][1]:.4f} lr {lr_at(step, args, first_step):.2e} "
                  f"{el / (step - first_step):.2f}s/step", flush=True)
        if step % args.checkpoint_every == 0 and step < args.steps:
            checkpoint(step, partial=True)
    checkpoint(step, partial=False)


if __name__ == "__main__":
    main()
