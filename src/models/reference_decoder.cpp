#include "models/reference_decoder.h"

#include <cmath>
#include <cstring>

#include "core/half.h"

namespace kiln {
namespace {

OpCall make_call(OpKind kind, const TensorView& dst, std::initializer_list<TensorView> srcs) {
  OpCall c;
  c.kind = kind;
  c.dst = dst;
  for (const auto& s : srcs) c.src[c.n_src++] = s;
  return c;
}

// A view of `t` [ne0, ne1*ne2 ...] reinterpreted as [ne0, ne1, ne2] (t contiguous).
TensorView reshape3(const TensorView& t, int64_t ne0, int64_t ne1, int64_t ne2) {
  return contiguous_view(t.type, {ne0, ne1, ne2, 1}, t.data);
}

}  // namespace

Result<std::unique_ptr<ReferenceDecoder>> ReferenceDecoder::create(const GgufFile& file,
                                                                   const ReferenceDecoderOptions& options) {
  if (options.kv_type != DType::F32 && options.kv_type != DType::F16)
    return make_error("reference decoder: KV cache type ", dtype_name(options.kv_type), " not supported (f32, f16)");
  if (options.n_ctx <= 0) return make_error("reference decoder: context size ", options.n_ctx, " must be positive");
  std::unique_ptr<ReferenceDecoder> d(new ReferenceDecoder());
  KILN_ASSIGN_OR_RETURN(d->hp_, read_hparams(file));
  KILN_ASSIGN_OR_RETURN(d->w_, bind_decoder_weights(file, d->hp_));
  d->opt_ = options;
  const size_t elt = type_size(options.kv_type);
  const auto n_ctx = static_cast<size_t>(options.n_ctx);
  d->k_cache_.assign(static_cast<size_t>(d->hp_.n_layer),
                     std::vector<uint8_t>(elt * n_ctx * static_cast<size_t>(d->hp_.n_embd_k_gqa())));
  d->v_cache_.assign(static_cast<size_t>(d->hp_.n_layer),
                     std::vector<uint8_t>(elt * n_ctx * static_cast<size_t>(d->hp_.n_embd_v_gqa())));
  return d;
}

void ReferenceDecoder::run(const OpCall& call) {
  const Status ok = check_kernel(call);
  KILN_ASSERT(ok.ok(), ok.ok() ? "" : ok.error().message);
  const KernelPlan plan = plan_kernel(call);
  if (scratch_.size() < plan.scratch_bytes + kScratchAlign) scratch_.resize(plan.scratch_bytes + kScratchAlign);
  auto base = reinterpret_cast<uintptr_t>(scratch_.data());
  void* scratch = reinterpret_cast<void*>((base + kScratchAlign - 1) / kScratchAlign * kScratchAlign);
  for (int phase = 0; phase < plan.n_phases; ++phase) run_kernel(call, phase, 0, plan.units[phase], scratch);
}

TensorView ReferenceDecoder::f32(std::vector<std::vector<float>>& arena, int64_t ne0, int64_t ne1, int64_t ne2) {
  arena.emplace_back(static_cast<size_t>(ne0 * ne1 * ne2));
  return contiguous_view(DType::F32, {ne0, ne1, ne2, 1}, arena.back().data());
}

TensorView ReferenceDecoder::rms_norm_mul(std::vector<std::vector<float>>& arena, const TensorView& x,
                                          const Weight& w) {
  TensorView normed = f32(arena, x.ne[0], x.ne[1], x.ne[2]);
  OpCall norm = make_call(OpKind::RmsNorm, normed, {x});
  norm.params.eps = hp_.rms_eps;
  run(norm);
  TensorView out = f32(arena, x.ne[0], x.ne[1], x.ne[2]);
  run(make_call(OpKind::Mul, out, {normed, w.view}));
  return out;
}

TensorView ReferenceDecoder::linear(std::vector<std::vector<float>>& arena, const Weight& w, const Weight& bias,
                                    const TensorView& x) {
  TensorView y = f32(arena, w.view.ne[1], x.ne[1]);
  run(make_call(OpKind::MulMat, y, {w.view, x}));
  if (!bias) return y;
  TensorView yb = f32(arena, w.view.ne[1], x.ne[1]);
  run(make_call(OpKind::Add, yb, {y, bias.view}));
  return yb;
}

Result<std::vector<float>> ReferenceDecoder::decode(std::span<const int32_t> tokens) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens == 0) return std::vector<float>{};
  if (n_past_ + n_tokens > opt_.n_ctx)
    return make_error("decode: ", n_past_, " cached + ", n_tokens, " new tokens exceed the context size ", opt_.n_ctx);
  for (int32_t t : tokens) {
    if (t < 0 || t >= hp_.n_vocab) return make_error("decode: token id ", t, " outside the vocabulary [0, ", hp_.n_vocab, ")");
  }
  std::vector<std::vector<float>> arena;  // every intermediate of this call, freed at return
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  std::vector<int32_t> pos(static_cast<size_t>(n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(n_past_ + i);
  const TensorView ids_v = contiguous_view(DType::I32, {n_tokens, 1, 1, 1}, ids.data());
  const TensorView pos_v = contiguous_view(DType::I32, {n_tokens, 1, 1, 1}, pos.data());

  const int64_t hd_k = hp_.head_dim_k, hd_v = hp_.head_dim_v;
  const int64_t n_head = hp_.n_head, n_head_kv = hp_.n_head_kv;
  const int64_t n_kv = n_past_ + n_tokens;
  const size_t kv_elt = type_size(opt_.kv_type);

  TensorView x = f32(arena, hp_.n_embd, n_tokens);  // [n_embd, n_tokens]
  run(make_call(OpKind::GetRows, x, {w_.tok_embd.view, ids_v}));

  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    const Block& blk = w_.blocks[static_cast<size_t>(il)];
    TensorView cur = rms_norm_mul(arena, x, blk.attn_norm);
    TensorView q = linear(arena, blk.attn.wq, blk.attn.bq, cur);  // [n_head * hd_k, n_tokens]
    TensorView k = linear(arena, blk.attn.wk, blk.attn.bk, cur);  // [n_head_kv * hd_k, n_tokens]
    TensorView v = linear(arena, blk.attn.wv, blk.attn.bv, cur);  // [n_head_kv * hd_v, n_tokens]
    q = reshape3(q, hd_k, n_head, n_tokens);
    k = reshape3(k, hd_k, n_head_kv, n_tokens);
    if (blk.attn.q_norm) {
      q = rms_norm_mul(arena, q, blk.attn.q_norm);
      k = rms_norm_mul(arena, k, blk.attn.k_norm);
    }
    OpCall rope_q = make_call(OpKind::Rope, f32(arena, hd_k, n_head, n_tokens), {q, pos_v});
    rope_q.params.rope = hp_.rope_params();
    if (blk.rope_freqs) rope_q.src[rope_q.n_src++] = blk.rope_freqs.view;
    run(rope_q);
    OpCall rope_k = rope_q;
    rope_k.dst = f32(arena, hd_k, n_head_kv, n_tokens);
    rope_k.src[0] = k;
    run(rope_k);
    q = rope_q.dst;
    k = rope_k.dst;

    // Store K and V of the new tokens at positions n_past.. of the cache, converting to its type.
    auto& kc = k_cache_[static_cast<size_t>(il)];
    auto& vc = v_cache_[static_cast<size_t>(il)];
    const auto n_ctx = static_cast<size_t>(opt_.n_ctx);
    auto store = [&](std::vector<uint8_t>& cache, const float* src, int64_t hd, int64_t h, int64_t t) {
      uint8_t* dst = cache.data() + ((static_cast<size_t>(h) * n_ctx + static_cast<size_t>(n_past_ + t)) *
                                     static_cast<size_t>(hd)) * kv_elt;
      for (int64_t i = 0; i < hd; ++i) {
        if (opt_.kv_type == DType::F32) {
          std::memcpy(dst + static_cast<size_t>(i) * 4, &src[i], 4);
        } else {
          const uint16_t hbits = f32_to_f16(src[i]);
          std::memcpy(dst + static_cast<size_t>(i) * 2, &hbits, 2);
        }
      }
    };
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t h = 0; h < n_head_kv; ++h) {
        store(kc, k.ptr<float>(h, t), hd_k, h, t);
        store(vc, v.ptr<float>(t) + h * hd_v, hd_v, h, t);
      }
    }
    TensorView k_all, v_all;  // [hd, n_kv, n_head_kv] over the cache
    k_all.type = v_all.type = opt_.kv_type;
    k_all.ne = {hd_k, n_kv, n_head_kv, 1};
    k_all.nb = {kv_elt, static_cast<size_t>(hd_k) * kv_elt, static_cast<size_t>(hd_k) * kv_elt * n_ctx, 0};
    k_all.nb[3] = k_all.nb[2] * static_cast<size_t>(n_head_kv);
    k_all.data = kc.data();
    v_all.ne = {hd_v, n_kv, n_head_kv, 1};
    v_all.nb = {kv_elt, static_cast<size_t>(hd_v) * kv_elt, static_cast<size_t>(hd_v) * kv_elt * n_ctx, 0};
    v_all.nb[3] = v_all.nb[2] * static_cast<size_t>(n_head_kv);
    v_all.data = vc.data();

    // q as [hd_k, n_tokens, n_head]: a permuted view of [hd_k, n_head, n_tokens].
    TensorView q_perm = q;
    q_perm.ne = {hd_k, n_tokens, n_head, 1};
    q_perm.nb = {q.nb[0], q.nb[2], q.nb[1], q.nb[3]};
    // Output [hd_v, n_head, n_tokens] contiguous, written through a [hd_v, n_tokens, n_head] view.
    TensorView attn = f32(arena, hd_v * n_head, n_tokens);
    TensorView attn_perm = contiguous_view(DType::F32, {hd_v, n_head, n_tokens, 1}, attn.data);
    std::swap(attn_perm.ne[1], attn_perm.ne[2]);
    std::swap(attn_perm.nb[1], attn_perm.nb[2]);
    OpCall att = make_call(OpKind::Attention, attn_perm, {q_perm, k_all, v_all});
    att.params.scale = 1.0f / std::sqrt(static_cast<float>(hd_k));
    att.params.causal = true;
    att.params.q_pos0 = static_cast<int32_t>(n_past_);
    att.params.attn_path = opt_.attention;
    run(att);

    TensorView proj = linear(arena, blk.attn.wo, Weight{}, attn);
    TensorView x_attn = f32(arena, hp_.n_embd, n_tokens);
    run(make_call(OpKind::Add, x_attn, {x, proj}));

    TensorView ffn_in = rms_norm_mul(arena, x_attn, blk.ffn_norm);
    TensorView gate = linear(arena, blk.mlp.gate, Weight{}, ffn_in);
    TensorView up = linear(arena, blk.mlp.up, Weight{}, ffn_in);
    TensorView act = f32(arena, hp_.n_ff, n_tokens);
    run(make_call(OpKind::SwiGlu, act, {gate, up}));
    TensorView down = linear(arena, blk.mlp.down, Weight{}, act);
    x = f32(arena, hp_.n_embd, n_tokens);
    run(make_call(OpKind::Add, x, {x_attn, down}));
  }
  TensorView out = rms_norm_mul(arena, x, w_.output_norm);
  TensorView logits = linear(arena, w_.output, Weight{}, out);  // [n_vocab, n_tokens]
  n_past_ += n_tokens;
  const float* p = static_cast<const float*>(logits.data);
  return std::vector<float>(p, p + hp_.n_vocab * n_tokens);
}

}  // namespace kiln
