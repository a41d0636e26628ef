#include "models/sd/clip_text.h"

#include "models/weight_binder.h"

namespace kiln::sd {

Result<ClipTextWeights> bind_clip_text(const GgufFile& file, const std::string& prefix) {
  ClipTextWeights w;
  const ClipTextHParams& hp = w.hp;
  const int64_t D = hp.n_embd, F = hp.n_ff;
  const WeightBinder b(file, "sd text encoder");
  const std::string p = prefix + ".";
  KILN_ASSIGN_OR_RETURN(w.token_embd, b.required(p + "embeddings.token_embedding.weight", {D, hp.n_vocab}));
  KILN_ASSIGN_OR_RETURN(w.pos_embd, b.required(p + "embeddings.position_embedding.weight", {D, hp.n_token}));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const std::string l = p + "encoder.layers." + std::to_string(il) + ".";
    VitLayer& v = w.layers[static_cast<size_t>(il)];
    KILN_ASSIGN_OR_RETURN(v.ln1_w, b.required(l + "layer_norm1.weight", {D}));
    KILN_ASSIGN_OR_RETURN(v.ln1_b, b.required(l + "layer_norm1.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.q_w, b.required(l + "self_attn.q_proj.weight", {D, D}));
    KILN_ASSIGN_OR_RETURN(v.q_b, b.required(l + "self_attn.q_proj.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.k_w, b.required(l + "self_attn.k_proj.weight", {D, D}));
    KILN_ASSIGN_OR_RETURN(v.k_b, b.required(l + "self_attn.k_proj.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.v_w, b.required(l + "self_attn.v_proj.weight", {D, D}));
    KILN_ASSIGN_OR_RETURN(v.v_b, b.required(l + "self_attn.v_proj.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.o_w, b.required(l + "self_attn.out_proj.weight", {D, D}));
    KILN_ASSIGN_OR_RETURN(v.o_b, b.required(l + "self_attn.out_proj.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.ln2_w, b.required(l + "layer_norm2.weight", {D}));
    KILN_ASSIGN_OR_RETURN(v.ln2_b, b.required(l + "layer_norm2.bias", {D}));
    KILN_ASSIGN_OR_RETURN(v.up_w, b.required(l + "mlp.fc1.weight", {D, F}));
    KILN_ASSIGN_OR_RETURN(v.up_b, b.required(l + "mlp.fc1.bias", {F}));
    KILN_ASSIGN_OR_RETURN(v.down_w, b.required(l + "mlp.fc2.weight", {F, D}));
    KILN_ASSIGN_OR_RETURN(v.down_b, b.required(l + "mlp.fc2.bias", {D}));
  }
  KILN_ASSIGN_OR_RETURN(w.final_ln_w, b.required(p + "final_layer_norm.weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.final_ln_b, b.required(p + "final_layer_norm.bias", {D}));
  return w;
}

Result<int64_t> clip_text_layers(const ClipTextHParams& hp, int clip_skip) {
  // ref: CLIPEncoder::forward: layers 0 .. n_layer - clip_skip run.
  const int skip = clip_skip <= 0 ? 1 : clip_skip;
  if (skip > hp.n_layer)
    return make_error("sd text encoder: clip_skip ", clip_skip, " leaves none of its ", hp.n_layer, " layers");
  return hp.n_layer - skip + 1;
}

Tensor clip_text_graph(Graph& g, const ClipTextWeights& w, Tensor ids, int64_t n_layers) {
  const ClipTextHParams& hp = w.hp;
  // ref: CLIPEmbeddings::forward: get_rows of the token table plus the position table.
  Tensor x = g.get_rows(weight_tensor(g, w.token_embd), ids, "token_embd");
  x = g.add(x, f32_weight_tensor(g, w.pos_embd, "pos_embd"), "pos_embd");
  const VitDims dims{hp.n_embd / hp.n_head, hp.n_head, hp.n_head, hp.eps, ClipFfnAct::GeluQuick, true};
  x = vit_blocks(g, dims, w.layers, x, n_layers, AttentionPath::Plain);
  return vit_norm(g, x, w.final_ln_w, w.final_ln_b, hp.eps, "final_ln");
}

}  // namespace kiln::sd
