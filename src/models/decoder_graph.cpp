#include "models/decoder_graph.h"

#include <cmath>
#include <string>

namespace kiln {
namespace {

// y = W x (+ b)
Tensor linear(Graph& g, Tensor w, Tensor b, Tensor x, const OpParams& params, const std::string& name) {
  Tensor y = g.mul_mat(w, x, params, name);
  return b.valid() ? g.add(y, b, name + "+b") : y;
}

Tensor weight(Graph& g, const Weight& w) {
  return w ? g.external(w.info->name, w.view) : Tensor{};
}

}  // namespace

Result<DecoderGraph> build_decoder_graph(Graph& g, const HParams& hp, const DecoderWeights& w,
                                         const std::vector<KvLayerMemory>& kv, const DecoderGraphSpec& spec) {
  KILN_ASSERT(kv.size() == static_cast<size_t>(hp.n_layer), "decoder graph: one KV memory per layer");
  KILN_ASSERT(spec.n_tokens <= spec.n_kv, "decoder graph: more tokens than cells attention reads");
  const int64_t T = spec.n_tokens;
  const int64_t hd_k = hp.head_dim_k, hd_v = hp.head_dim_v;
  const int64_t n_head = hp.n_head, n_head_kv = hp.n_head_kv;
  const RopeParams rope = hp.rope_params();

  DecoderGraph out;
  if (spec.embeddings_input) {
    out.input_embd = g.input("input_embd", DType::F32, {hp.n_embd, T, 1, 1});
  } else {
    out.tokens = g.input("tokens", DType::I32, {T, 1, 1, 1});
  }
  out.positions = g.input("positions", DType::I32, {T, 1, 1, 1});
  out.kv_cells = g.input("kv_cells", DType::I32, {T, 1, 1, 1});
  out.kq_mask = g.input("kq_mask", DType::F32, {spec.n_kv, T, 1, 1});
  out.out_rows = g.input("out_rows", DType::I32, {spec.n_outputs, 1, 1, 1});

  OpParams mm_params;
  mm_params.single_row_order = spec.single_row_order;
  OpParams attn_params = mm_params;
  attn_params.scale = 1.0f / std::sqrt(static_cast<float>(hd_k));
  attn_params.attn_path = spec.attention;

  // [n_embd, T]. ref: llm_graph_input_embd: embeddings enter as they are (no scaling for these
  // architectures).
  Tensor x = spec.embeddings_input ? out.input_embd : g.get_rows(weight(g, w.tok_embd), out.tokens, "inp_embd");
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Block& blk = w.blocks[static_cast<size_t>(il)];
    // append, not "l" + std::to_string(il): GCC 12 reports a false -Wrestrict on
    // operator+(const char*, std::string&&) (GCC bug 105329).
    const std::string p = std::string("l").append(std::to_string(il)).append(".");
    Tensor cur = g.rms_norm_mul(x, weight(g, blk.attn_norm), hp.rms_eps, p + "attn_norm");

    Tensor q = linear(g, weight(g, blk.attn.wq), weight(g, blk.attn.bq), cur, mm_params, p + "q");
    Tensor k = linear(g, weight(g, blk.attn.wk), weight(g, blk.attn.bk), cur, mm_params, p + "k");
    Tensor v = linear(g, weight(g, blk.attn.wv), weight(g, blk.attn.bv), cur, mm_params, p + "v");
    q = g.reshape(q, {hd_k, n_head, T, 1});
    k = g.reshape(k, {hd_k, n_head_kv, T, 1});
    if (blk.attn.q_norm) {
      q = g.rms_norm_mul(q, weight(g, blk.attn.q_norm), hp.rms_eps, p + "q_norm");
      k = g.rms_norm_mul(k, weight(g, blk.attn.k_norm), hp.rms_eps, p + "k_norm");
    }
    if (const Tensor freq_factors = weight(g, blk.rope_freqs); freq_factors.valid()) {
      q = g.rope(q, out.positions, freq_factors, rope, p + "q_rope");
      k = g.rope(k, out.positions, freq_factors, rope, p + "k_rope");
    } else {
      q = g.rope(q, out.positions, rope, p + "q_rope");
      k = g.rope(k, out.positions, rope, p + "k_rope");
    }

    // Write this batch's K and V into cells kv_cells of the cache (one row per token).
    const TensorView& kmem = kv[static_cast<size_t>(il)].k;
    const TensorView& vmem = kv[static_cast<size_t>(il)].v;
    const Tensor k_cache = g.external(p + "k_cache", kmem);
    const Tensor v_cache = g.external(p + "v_cache", vmem);
    const size_t k_row = kmem.nb[1], v_row = vmem.nb[1];
    const size_t k_head = row_size(kmem.type, hd_k), k_elt = type_size(kmem.type);
    const size_t v_head = row_size(vmem.type, hd_v), v_elt = type_size(vmem.type);
    g.set_rows(k_cache, g.reshape(k, {hd_k * n_head_kv, T, 1, 1}), out.kv_cells, p + "k_store");
    g.set_rows(v_cache, g.reshape(v, {hd_v * n_head_kv, T, 1, 1}), out.kv_cells, p + "v_store");

    // Attention over cells [0, n_kv): q [hd_k, T, n_head], k [hd_k, n_kv, n_head_kv], v likewise.
    const Tensor k_all = g.view(k_cache, {hd_k, spec.n_kv, n_head_kv, 1},
                                {k_elt, k_row, k_head, k_row * spec.n_kv}, 0, p + "k_all");
    const Tensor v_all = g.view(v_cache, {hd_v, spec.n_kv, n_head_kv, 1},
                                {v_elt, v_row, v_head, v_row * spec.n_kv}, 0, p + "v_all");
    const Tensor q_heads = g.permute(q, {0, 2, 1, 3});
    Tensor attn = g.op(OpKind::Attention, {q_heads, k_all, v_all, out.kq_mask}, attn_params, DType::F32,
                       {hd_v, T, n_head, 1}, p + "attn");
    attn = g.cast(g.permute(attn, {0, 2, 1, 3}), DType::F32, p + "attn_merge");  // [hd_v, n_head, T]
    attn = g.reshape(attn, {hd_v * n_head, T, 1, 1});
    x = g.add(x, g.mul_mat(weight(g, blk.attn.wo), attn, mm_params, p + "attn_out"), p + "attn_res");

    cur = g.rms_norm_mul(x, weight(g, blk.ffn_norm), hp.rms_eps, p + "ffn_norm");
    Tensor gate = g.mul_mat(weight(g, blk.mlp.gate), cur, mm_params, p + "ffn_gate");
    Tensor up = g.mul_mat(weight(g, blk.mlp.up), cur, mm_params, p + "ffn_up");
    Tensor down =
        g.mul_mat(weight(g, blk.mlp.down), g.swiglu(gate, up, p + "ffn_act"), mm_params, p + "ffn_down");
    x = g.add(x, down, p + "ffn_res");
  }
  // Only the rows whose outputs are wanted go through the output norm and head.
  x = g.get_rows(x, out.out_rows, "out_rows");
  x = g.rms_norm_mul(x, weight(g, w.output_norm), hp.rms_eps, "output_norm");
  if (spec.output == DecoderOutput::Embeddings) {
    out.embeddings = x;
    g.mark_output(out.embeddings);
  } else {
    out.logits = g.mul_mat(weight(g, w.output), x, mm_params, "logits");
    g.mark_output(out.logits);
  }
  KILN_TRY(g.status());
  return out;
}

}  // namespace kiln
