"""Saves a trained model as a Hugging Face folder (as transformers' save_pretrained would lay it
out for LlamaForCausalLM with a SentencePiece LlamaTokenizer) and the reference logits that
tests/convert compares a converted GGUF against."""
import json
import os
import shutil

import torch

from safetensors_writer import write_safetensors

TRANSFORMERS_VERSION = "4.46.0"  # the HF layout these files follow
# A plain role-prefixed template: the model is not instruction-tuned, this only makes chat usable.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}"
)


def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def save_hf_folder(model, sp_model_path, out_dir, special):
    """special: {"unk": (id, piece), "bos": ..., "eos": ...}."""
    cfg = model.cfg
    os.makedirs(out_dir, exist_ok=True)
    _write_json(os.path.join(out_dir, "config.json"), {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "initializer_range": cfg.initializer_range,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": "float32",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    })
    _write_json(os.path.join(out_dir, "generation_config.json"), {
        "_from_model_config": True,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "transformers_version": TRANSFORMERS_VERSION,
    })
    added = {}
    for key in ("unk", "bos", "eos"):
        tid, piece = special[key]
        added[str(tid)] = {"content": piece, "lstrip": False, "normalized": False, "rstrip": False,
                           "single_word": False, "special": True}
    _write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": special["bos"][1],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": special["eos"][1],
        "legacy": True,
        "model_max_length": cfg.max_position_embeddings,
        "pad_token": None,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": special["unk"][1],
        "use_default_system_prompt": False,
    })
    _write_json(os.path.join(out_dir, "special_tokens_map.json"), {
        k + "_token": {"content": special[k][1], "lstrip": False, "normalized": False, "rstrip": False,
                       "single_word": False} for k in ("bos", "eos", "unk")
    })
    shutil.copyfile(sp_model_path, os.path.join(out_dir, "tokenizer.model"))
    # Written to a temporary name first so a reader never sees a half-written checkpoint.
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    write_safetensors(tmp, model.hf_state_dict(), metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))


@torch.no_grad()
def reference_logits(model, sp, prompts, n_greedy=8):
    """For each prompt: SentencePiece ids (no BOS), the model's input (BOS first, as llama.cpp
    adds it for this vocabulary), the last position's logits over the whole vocabulary, and
    n_greedy greedy continuation tokens. Computed in float64 (a copy of the model), so the values
    are the exact function the F32 weights define, up to float64 rounding."""
    ref = type(model)(model.cfg).double()
    ref.load_state_dict(model.state_dict())
    ref.eval()
    out = []
    for text in prompts:
        ids = sp.encode(text)
        tokens = [model.cfg.bos_token_id] + ids
        logits = ref(torch.tensor([tokens]))[0, -1]
        greedy = []
        seq = list(tokens)
        for _ in range(n_greedy):
            nxt = int(ref(torch.tensor([seq]))[0, -1].argmax())
            greedy.append(nxt)
            seq.append(nxt)
        out.append({
            "text": text,
            "sp_ids": ids,
            "tokens": tokens,
            "last_logits": [float(f"{v:.7g}") for v in logits.tolist()],
            "greedy": greedy,
        })
    return out
