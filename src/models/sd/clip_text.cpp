#include "models/sd/clip_text.h"

#include <algorithm>

#include "models/weight_binder.h"

namespace kiln::sd {
namespace {

// The tensor names of one spelling (see the header), after "prefix.". A layer's names follow
// `layer`, N and "."; the modules' names take ".weight" / ".bias", the fused q/k/v names are whole.
struct ClipTextNames {
  const char *token_embd, *pos_embd, *layer;
  const char *ln1, *ln2, *q, *k, *v, *out, *fc1, *fc2, *final_ln;  // modules (q, k, v: null when only fused)
  const char *qkv_w, *qkv_b;
};

constexpr ClipTextNames kHfNames = {
    .token_embd = "embeddings.token_embedding.weight",
    .pos_embd = "embeddings.position_embedding.weight",
    .layer = "encoder.layers.",
    .ln1 = "layer_norm1",
    .ln2 = "layer_norm2",
    .q = "self_attn.q_proj",
    .k = "self_attn.k_proj",
    .v = "self_attn.v_proj",
    .out = "self_attn.out_proj",
    .fc1 = "mlp.fc1",
    .fc2 = "mlp.fc2",
    .final_ln = "final_layer_norm",
    .qkv_w = "self_attn.in_proj.weight",
    .qkv_b = "self_attn.in_proj.bias",
};
constexpr ClipTextNames kOpenClipNames = {
    .token_embd = "token_embedding.weight",
    .pos_embd = "positional_embedding",
    .layer = "transformer.resblocks.",
    .ln1 = "ln_1",
    .ln2 = "ln_2",
    .q = nullptr,
    .k = nullptr,
    .v = nullptr,
    .out = "attn.out_proj",
    .fc1 = "mlp.c_fc",
    .fc2 = "mlp.c_proj",
    .final_ln = "ln_final",
    .qkv_w = "attn.in_proj_weight",
    .qkv_b = "attn.in_proj_bias",
};

// One block's tensors under `l` ("prefix.encoder.layers.N.").
Result<VitLayer> bind_layer(const WeightBinder& b, const ClipTextNames& n, const std::string& l,
                            const ClipTextHParams& hp) {
  const int64_t D = hp.n_embd, F = hp.n_ff;
  const auto w = [&](const char* part) { return l + part + ".weight"; };
  const auto bias = [&](const char* part) { return l + part + ".bias"; };
  VitLayer v;
  KILN_ASSIGN_OR_RETURN(v.ln1_w, b.required(w(n.ln1), {D}));
  KILN_ASSIGN_OR_RETURN(v.ln1_b, b.required(bias(n.ln1), {D}));
  // ref: CLIPTextModelRunner: a layer's in_proj means q, k and v fused (proj_in).
  if (n.q == nullptr || b.file().find_tensor(w(n.q)) == nullptr) {
    KILN_ASSIGN_OR_RETURN(v.qkv_w, b.required(l + n.qkv_w, {D, 3 * D}));
    KILN_ASSIGN_OR_RETURN(v.qkv_b, b.required(l + n.qkv_b, {3 * D}));
  } else {
    KILN_ASSIGN_OR_RETURN(v.q_w, b.required(w(n.q), {D, D}));
    KILN_ASSIGN_OR_RETURN(v.q_b, b.required(bias(n.q), {D}));
    KILN_ASSIGN_OR_RETURN(v.k_w, b.required(w(n.k), {D, D}));
    KILN_ASSIGN_OR_RETURN(v.k_b, b.required(bias(n.k), {D}));
    KILN_ASSIGN_OR_RETURN(v.v_w, b.required(w(n.v), {D, D}));
    KILN_ASSIGN_OR_RETURN(v.v_b, b.required(bias(n.v), {D}));
  }
  KILN_ASSIGN_OR_RETURN(v.o_w, b.required(w(n.out), {D, D}));
  KILN_ASSIGN_OR_RETURN(v.o_b, b.required(bias(n.out), {D}));
  KILN_ASSIGN_OR_RETURN(v.ln2_w, b.required(w(n.ln2), {D}));
  KILN_ASSIGN_OR_RETURN(v.ln2_b, b.required(bias(n.ln2), {D}));
  KILN_ASSIGN_OR_RETURN(v.up_w, b.required(w(n.fc1), {D, F}));
  KILN_ASSIGN_OR_RETURN(v.up_b, b.required(bias(n.fc1), {F}));
  KILN_ASSIGN_OR_RETURN(v.down_w, b.required(w(n.fc2), {F, D}));
  KILN_ASSIGN_OR_RETURN(v.down_b, b.required(bias(n.fc2), {D}));
  return v;
}

}  // namespace

std::optional<ClipTextHParams> clip_text_hparams(int64_t n_embd) {
  // ref: CLIPTextModel's constructor and CLIPMLP (GELU for the 1024 and 1280 wide encoders).
  ClipTextHParams hp;
  switch (n_embd) {
    case 768:
      return hp;
    case 1024:
      hp.n_embd = 1024, hp.n_ff = 4096, hp.n_head = 16, hp.n_layer = 24, hp.n_layer_run = 23;
      hp.act = ClipFfnAct::Gelu;
      return hp;
    case 1280:
      hp.n_embd = 1280, hp.n_ff = 5120, hp.n_head = 20, hp.n_layer = 32, hp.n_layer_run = 32;
      hp.act = ClipFfnAct::Gelu;
      return hp;
    default:
      return std::nullopt;
  }
}

Result<ClipTextWeights> bind_clip_text(const GgufFile& file, const std::string& prefix) {
  const std::string p = prefix + ".";
  const ClipTextNames& n =
      file.find_tensor(p + kOpenClipNames.token_embd) != nullptr ? kOpenClipNames : kHfNames;
  const GgufTensorInfo* token = file.find_tensor(p + n.token_embd);
  std::optional<ClipTextHParams> hp = clip_text_hparams(token != nullptr ? token->ne[0] : 768);
  if (!hp)
    return make_error(
        "sd text encoder: '", p + n.token_embd, "' is ", token->ne[0],
        " wide, which is no CLIP text encoder's (768: CLIP-L, 1024: OpenCLIP-H, 1280: OpenCLIP-bigG)");
  ClipTextWeights w;
  w.hp = *hp;
  const int64_t D = hp->n_embd;
  const WeightBinder b(file, "sd text encoder");
  KILN_ASSIGN_OR_RETURN(w.token_embd, b.required(p + n.token_embd, {D, hp->n_vocab}));
  KILN_ASSIGN_OR_RETURN(w.pos_embd, b.required(p + n.pos_embd, {D, hp->n_token}));
  w.layers.reserve(static_cast<size_t>(hp->n_layer_run));
  for (int64_t il = 0; il < hp->n_layer_run; ++il) {
    KILN_ASSIGN_OR_RETURN(VitLayer layer, bind_layer(b, n, p + n.layer + std::to_string(il) + ".", *hp));
    w.layers.push_back(std::move(layer));
  }
  KILN_ASSIGN_OR_RETURN(w.final_ln_w, b.required(p + n.final_ln + ".weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.final_ln_b, b.required(p + n.final_ln + ".bias", {D}));
  return w;
}

Result<int64_t> clip_text_layers(const ClipTextHParams& hp, int clip_skip) {
  // ref: CLIPEncoder::forward: layers 0 .. n_layer - clip_skip run.
  const int skip = clip_skip <= 0 ? 1 : clip_skip;
  if (skip > hp.n_layer)
    return make_error("sd text encoder: clip_skip ", clip_skip, " leaves none of its ", hp.n_layer, " layers");
  return std::min(hp.n_layer - skip + 1, hp.n_layer_run);
}

Tensor clip_text_graph(Graph& g, const ClipTextWeights& w, Tensor ids, int64_t n_layers) {
  const ClipTextHParams& hp = w.hp;
  // ref: CLIPEmbeddings::forward: get_rows of the token table plus the position table.
  Tensor x = g.get_rows(weight_tensor(g, w.token_embd), ids, "token_embd");
  x = g.add(x, f32_weight_tensor(g, w.pos_embd, "pos_embd"), "pos_embd");
  const VitDims dims{hp.n_embd / hp.n_head, hp.n_head, hp.n_head, hp.eps, hp.act, true};
  x = vit_blocks(g, dims, w.layers, x, n_layers, AttentionPath::Plain);
  return vit_norm(g, x, w.final_ln_w, w.final_ln_b, hp.eps, "final_ln");
}

}  // namespace kiln::sd
