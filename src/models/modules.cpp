#include "models/modules.h"

#include <string>

#include "models/weight_binder.h"

namespace kiln {

Result<DecoderWeights> bind_decoder_weights(const GgufFile& file, const HParams& hp) {
  const WeightBinder b(file, "model");
  DecoderWeights w;
  const int64_t q_rows = hp.n_head * hp.head_dim_k;
  const int64_t o_cols = hp.n_head * hp.head_dim_v;
  KILN_ASSIGN_OR_RETURN(w.tok_embd, b.required("token_embd.weight", {hp.n_embd, hp.n_vocab}));
  KILN_ASSIGN_OR_RETURN(w.output_norm, b.required("output_norm.weight", {hp.n_embd}));
  KILN_ASSIGN_OR_RETURN(w.output, b.optional("output.weight", {hp.n_embd, hp.n_vocab}));
  if (!w.output) {
    w.output = w.tok_embd;
    w.tied_output = true;
  }
  KILN_ASSIGN_OR_RETURN(const Weight rope_freqs, b.optional("rope_freqs.weight", {hp.n_rot / 2}));
  w.blocks.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    Block& blk = w.blocks[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    blk.rope_freqs = rope_freqs;
    KILN_ASSIGN_OR_RETURN(blk.attn_norm, b.required(p + "attn_norm.weight", {hp.n_embd}));
    KILN_ASSIGN_OR_RETURN(blk.attn.wq, b.required(p + "attn_q.weight", {hp.n_embd, q_rows}));
    KILN_ASSIGN_OR_RETURN(blk.attn.wk, b.required(p + "attn_k.weight", {hp.n_embd, hp.n_embd_k_gqa()}));
    KILN_ASSIGN_OR_RETURN(blk.attn.wv, b.required(p + "attn_v.weight", {hp.n_embd, hp.n_embd_v_gqa()}));
    KILN_ASSIGN_OR_RETURN(blk.attn.wo, b.required(p + "attn_output.weight", {o_cols, hp.n_embd}));
    KILN_ASSIGN_OR_RETURN(blk.attn.bq, b.optional(p + "attn_q.bias", {q_rows}));
    KILN_ASSIGN_OR_RETURN(blk.attn.bk, b.optional(p + "attn_k.bias", {hp.n_embd_k_gqa()}));
    KILN_ASSIGN_OR_RETURN(blk.attn.bv, b.optional(p + "attn_v.bias", {hp.n_embd_v_gqa()}));
    if (hp.arch == Arch::Qwen2 && !(blk.attn.bq && blk.attn.bk && blk.attn.bv))
      return make_error("model: qwen2 layer ", il, " lacks attention biases (attn_q/k/v.bias)");
    if (hp.arch == Arch::Qwen3) {
      KILN_ASSIGN_OR_RETURN(blk.attn.q_norm, b.required(p + "attn_q_norm.weight", {hp.head_dim_k}));
      KILN_ASSIGN_OR_RETURN(blk.attn.k_norm, b.required(p + "attn_k_norm.weight", {hp.head_dim_k}));
    }
    KILN_ASSIGN_OR_RETURN(blk.ffn_norm, b.required(p + "ffn_norm.weight", {hp.n_embd}));
    if (file.find_tensor(p + "ffn_gate_inp.weight") != nullptr)
      return make_error("model: layer ", il, " has a mixture-of-experts router (ffn_gate_inp); mixture-of-experts is not supported yet");
    KILN_ASSIGN_OR_RETURN(blk.mlp.gate, b.required(p + "ffn_gate.weight", {hp.n_embd, hp.n_ff}));
    KILN_ASSIGN_OR_RETURN(blk.mlp.up, b.required(p + "ffn_up.weight", {hp.n_embd, hp.n_ff}));
    KILN_ASSIGN_OR_RETURN(blk.mlp.down, b.required(p + "ffn_down.weight", {hp.n_ff, hp.n_embd}));
  }
  return w;
}

}  // namespace kiln
