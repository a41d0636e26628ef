// Attention: dst = softmax(q k^T * scale + slope * mask) v, per query row, with grouped-query heads
// (query head h reads K/V head h / (h_q / h_kv)) and sequences broadcast like ggml (dim 3).
// Masking: src3 (F32 or F16, [n_kv, >= n_q, a | h, b | s]) when given; otherwise, when
// params.causal, query i sees keys j <= params.q_pos0 + i; otherwise every key.
//
// Two arithmetics (params.attn_path):
//  Plain: ref: llama.cpp's graph without flash attention: kq = mul_mat(k, q) (q converted to K's
//    vec_dot_type, e.g. F16, then K's vec_dot), soft_max_ext (ops/softmax_row.h), then
//    mul_mat(v, kq): with an F16 V the probabilities are rounded to F16 first; sums over keys in
//    F32, in key order.
//  Flash: ref: ggml_compute_forward_flash_attn_ext_f16_one_chunk (ggml-cpu/ops.cpp): q converted
//    to K's vec_dot_type; online softmax over keys with running max M and sum S; keys whose mask is
//    -inf are skipped; an F16 V accumulates in an F16 buffer (each step rounded to F16, a fused
//    multiply-add as ggml's SIMD ggml_vec_mad_f16), other V types in F32; the result is scaled by
//    1 / S (0 when S is 0).
//  The reference build is llama.cpp's AVX-512 CPU backend; where its float order is known it is
//  followed (ref: comments at each step): on the plain path with an F32 V, the softmax of
//  ggml_vec_soft_max_f32 (ggml_v_expf in chunks of 16) and the kqv mul_mat as llamafile's tinyBLAS
//  (16 lanes, batches of >= 2 queries) or ggml_vec_dot_f32 (one query) computes it; on the flash
//  path with F16/F32 K and V of one type, >= kFaTileQ queries and a V row of whole SIMD vectors
//  (tiled_value_lanes), ggml's tiled kernel (ggml_compute_forward_flash_attn_ext_tiled: F32 q,
//  tiles of kFaTileKv keys). With params.single_row_order every query takes the arithmetic of a
//  batch of one query. The tiled path's work unit is a block of kFaTileQ query rows of one head:
//  each K tile is transposed to F32 once for all of them, and they pass over each tile's K and V
//  rows quant::kMaxQueries at a time; each row's arithmetic is unchanged.
// K may be any type with a vec_dot (F32, F16, Q8_0...); V is F32 or F16 on the plain path and any
// type with a to_float on the flash path. q rows and K/V rows must be contiguous.
// One work unit is one query row of one head (the tiled path: a block of them; the plain path with
// an F32 V over several rows: a run of them, at most kPlainUnitsPerHead per head, taken
// quant::kMaxQueries rows at a time); its scratch (converted q, scores, accumulators) is private
// to the unit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/kernel.h"
#include "ops/quant/attention_vec.h"
#include "ops/quant/kernels.h"  // cpu_detected_level
#include "ops/quant/quant.h"
#include "ops/softmax_row.h"

namespace kiln::ops {
namespace {

size_t align_up(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// ref: ggml-cpu/common.h GGML_FA_TILE_Q / GGML_FA_TILE_KV; GGML_F32_EPR of the AVX-512 build.
constexpr int64_t kFaTileQ = 64, kFaTileKv = 64, kLanes = 16;

// w[0..n) <- e^(w - max) in place; returns their sum. ref: ggml_vec_soft_max_f32 (AVX-512): chunks
// of 16 through ggml_v_expf (quant::expf_ggml_avx512), each chunk reduced in F32 and added in
// double. ggml's rows are padded to a multiple of 16 keys (masked, contributing 0), so a partial
// last chunk is treated the same.
double exp_sum_ggml(int64_t n, float* w, float max) {
  quant::exp_shifted_ggml(n, w, max);
  return quant::sum_chunks16(n, w);
}

Status check_attention(const OpCall& call) {
  KILN_TRY(check_arity(call, 3, 4));
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const TensorView& v = call.src[2];
  const TensorView& d = call.dst;
  KILN_TRY(check_type(call, q, DType::F32, "src0 (q)"));
  KILN_TRY(check_type(call, d, DType::F32, "dst"));
  const QuantTraits* kt = quant_traits(k.type);
  if (kt == nullptr || kt->vec_dot == nullptr || kt->act_from_float == nullptr) {
    return make_error("[attention] no dot product for k ", describe(k));
  }
  const bool flash = call.params.attn_path == AttentionPath::Flash;
  if (v.type != DType::F32 && v.type != DType::F16) {
    const QuantTraits* vt = quant_traits(v.type);
    if (!flash || vt == nullptr || vt->to_float == nullptr) {
      return make_error("[attention] v ", describe(v), " is not supported on the ", flash ? "flash" : "plain",
                        " path");
    }
  }
  if (call.params.attn_path != AttentionPath::Plain && !flash) {
    return make_error("[attention] unknown path ", static_cast<int>(call.params.attn_path));
  }
  if (k.ne[0] != q.ne[0] || v.ne[1] != k.ne[1] || d.ne[0] != v.ne[0] || d.ne[1] != q.ne[1] ||
      d.ne[2] != q.ne[2] || d.ne[3] != q.ne[3] || q.ne[2] % k.ne[2] != 0 || q.ne[2] % v.ne[2] != 0 ||
      q.ne[3] % k.ne[3] != 0 || q.ne[3] % v.ne[3] != 0) {
    return make_error("[attention] q ", describe(q), ", k ", describe(k), ", v ", describe(v), " and dst ",
                      describe(d), " do not fit");
  }
  if (q.nb[0] != sizeof(float) || k.nb[0] != type_size(k.type) || v.nb[0] != type_size(v.type)) {
    return make_error("[attention] q, k and v rows must be contiguous");
  }
  if (call.n_src == 4) {
    const TensorView& m = call.src[3];
    if (m.type != DType::F32 && m.type != DType::F16)
      return make_error("[attention] mask ", describe(m), " must be f32 or f16");
    if (m.ne[0] != k.ne[1] || m.ne[1] < q.ne[1] || q.ne[2] % m.ne[2] != 0 || q.ne[3] % m.ne[3] != 0) {
      return make_error("[attention] mask ", describe(m), " does not cover ", k.ne[1], " keys x ", q.ne[1],
                        " queries");
    }
  }
  return ok_status();
}

struct Layout {
  size_t q_conv = 0, scores = 0, acc = 0, acc16 = 0, vrow = 0, lanes = 0, slot_w = 0, keys = 0, per_unit = 0;
};

Layout layout_of(const OpCall& call) {
  const TensorView& k = call.src[1];
  const int64_t dv = call.src[2].ne[0];
  Layout l;
  l.q_conv = 0;
  l.scores = l.q_conv + align_up(row_size(quant_traits(k.type)->vec_dot_type, k.ne[0]));
  // The plain path's scores of every key; the flash path's mask values of a block of keys.
  const size_t n_scores = call.params.attn_path == AttentionPath::Plain ? static_cast<size_t>(k.ne[1])
                                                                        : static_cast<size_t>(kFaTileKv);
  l.acc = l.scores + align_up(n_scores * sizeof(float));
  l.acc16 = l.acc + align_up(static_cast<size_t>(dv) * sizeof(float));
  l.vrow = l.acc16 + align_up(static_cast<size_t>(dv) * sizeof(uint16_t));
  l.lanes = l.vrow + align_up(static_cast<size_t>(dv) * sizeof(float));
  const size_t n_lanes = call.params.attn_path == AttentionPath::Plain ? 4 * kLanes : 0;
  l.slot_w = l.lanes + align_up(static_cast<size_t>(dv) * n_lanes * sizeof(float));
  // The plain path's scores again, grouped by the lane that sums them (see run_attention).
  const size_t n_slot_w = call.params.attn_path == AttentionPath::Plain ? n_scores : 0;
  l.keys = l.slot_w + align_up(n_slot_w * sizeof(float));
  // The one-query flash path's block of F16 V updates (quant::f16_mad_keys).
  const bool f16_keys = call.params.attn_path == AttentionPath::Flash && call.src[2].type == DType::F16;
  const size_t n_keys = f16_keys ? static_cast<size_t>(kFaTileKv) : 0;
  l.per_unit = l.keys + align_up(n_keys * sizeof(quant::F16Key));
  return l;
}

// The vector width (GGML_F32_EPR) of the llama.cpp CPU build a machine loads, which decides which
// V row sizes the tiled kernel takes: 16 floats on CPUs with AVX-512 (the build kiln's references
// come from), 8 on AVX2 CPUs without it (the haswell variant). So SigLIP's 72-value heads (Gemma 3's
// vision encoder) take the tiled kernel on AVX2 CPUs, as llama.cpp's prompts there do, and the
// one-query kernel, with its F16 accumulator, where llama.cpp's AVX-512 build takes it. The CPU's
// own features decide, not KILN_CPU: a lowered kernel level gives the same bits.
int64_t tiled_value_lanes() {
  static const int64_t lanes = quant::cpu_detected_level() == quant::CpuLevel::Avx2 ? 8 : kLanes;
  return lanes;
}

// ref: ggml_compute_forward_flash_attn_ext_f16's choice of the tiled kernel.
// params.single_row_order: the arithmetic of a batch of one query row (never tiled).
bool takes_tiled_path(const OpCall& call) {
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const TensorView& v = call.src[2];
  const bool one_row = call.params.single_row_order || q.ne[1] == 1;
  return call.params.attn_path == AttentionPath::Flash && !one_row &&
         (k.type == DType::F16 || k.type == DType::F32) && v.type == k.type && q.ne[1] >= kFaTileQ &&
         v.ne[0] % tiled_value_lanes() == 0;
}

// The tiled path's unit is a block of up to kFaTileQ query rows of one head; its scratch holds
// the K tile transposed to F32 ([dk][kFaTileKv]) and each row's scores, mask values (slope * mask
// of the tile's keys) and accumulator.
struct TiledLayout {
  size_t kt = 0, rows = 0, per_row = 0, mask = 0, acc = 0, per_unit = 0;
};

TiledLayout tiled_layout_of(const OpCall& call) {
  const int64_t dk = call.src[1].ne[0], dv = call.src[2].ne[0];
  TiledLayout l;
  l.rows = align_up(static_cast<size_t>(dk * kFaTileKv) * sizeof(float));
  l.mask = align_up(static_cast<size_t>(kFaTileKv) * sizeof(float));
  l.acc = l.mask + align_up(static_cast<size_t>(kFaTileKv) * sizeof(float));
  l.per_row = l.acc + align_up(static_cast<size_t>(dv) * sizeof(float));
  l.per_unit = l.rows + static_cast<size_t>(kFaTileQ) * l.per_row;
  return l;
}

int64_t n_tiled_blocks(const TensorView& q) { return (q.ne[1] + kFaTileQ - 1) / kFaTileQ; }

// The plain path with an F32 V over a batch of query rows (not params.single_row_order) takes
// them in blocks: a unit is a run of query rows of one head, at most kPlainUnitsPerHead units per
// head, so the scratch is bounded by that many units' and not by the rows. A unit takes its rows
// quant::kMaxQueries at a time, reusing one group's scratch: an F32 K's plane transposed to F32
// once per unit (the scores of 8 keys at a time in vector lanes), and per row its scores, their
// regrouping by summing lane and its 16 lanes of dv sums (each V row is read once per group).
// Each row's arithmetic is its own, whatever rows share its unit or group.
constexpr int64_t kPlainUnitsPerHead = 8;

bool takes_plain_block_path(const OpCall& call) {
  const bool one_row = call.params.single_row_order || call.src[0].ne[1] == 1;
  return call.params.attn_path == AttentionPath::Plain && !one_row && call.src[2].type == DType::F32;
}

struct PlainBlockLayout {
  int64_t ld = 0;  // keys rounded up to 8: the transposed plane's row and a row's scores
  int64_t rows_per_unit = 0, units_per_head = 0;
  // rows: where the rows' scratch begins (after the transposed plane); per row, from its start:
  // the converted q at 0, then w (scores), slot_w, lanes ([kLanes][dv]) and acc (dv).
  size_t rows = 0, per_row = 0, w = 0, slot_w = 0, lanes = 0, acc = 0, per_unit = 0;
};

PlainBlockLayout plain_block_layout_of(const OpCall& call) {
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const int64_t dk = k.ne[0], dv = call.src[2].ne[0];
  PlainBlockLayout l;
  l.ld = (k.ne[1] + 7) / 8 * 8;
  const int64_t n_groups = (q.ne[1] + quant::kMaxQueries - 1) / quant::kMaxQueries;
  const int64_t groups_per_unit = (n_groups + kPlainUnitsPerHead - 1) / kPlainUnitsPerHead;
  l.rows_per_unit = groups_per_unit * quant::kMaxQueries;
  l.units_per_head = (q.ne[1] + l.rows_per_unit - 1) / l.rows_per_unit;
  l.rows = k.type == DType::F32 ? align_up(static_cast<size_t>(dk * l.ld) * sizeof(float)) : 0;
  l.w = align_up(row_size(quant_traits(k.type)->vec_dot_type, dk));  // the row's q, as K's vec_dot takes it
  l.slot_w = l.w + align_up(static_cast<size_t>(l.ld) * sizeof(float));
  l.lanes = l.slot_w + align_up(static_cast<size_t>(l.ld) * sizeof(float));
  l.acc = l.lanes + align_up(static_cast<size_t>(kLanes * dv) * sizeof(float));
  l.per_row = l.acc + align_up(static_cast<size_t>(dv) * sizeof(float));
  l.per_unit = l.rows + static_cast<size_t>(quant::kMaxQueries) * l.per_row;
  return l;
}

KernelPlan plan_attention(const OpCall& call) {
  const TensorView& q = call.src[0];
  KernelPlan p;
  if (takes_tiled_path(call)) {
    p.units[0] = n_tiled_blocks(q) * q.ne[2] * q.ne[3];
    p.scratch_bytes = static_cast<size_t>(p.units[0]) * tiled_layout_of(call).per_unit;
  } else if (takes_plain_block_path(call)) {
    const PlainBlockLayout l = plain_block_layout_of(call);
    p.units[0] = l.units_per_head * q.ne[2] * q.ne[3];
    p.scratch_bytes = static_cast<size_t>(p.units[0]) * l.per_unit;
  } else {
    p.units[0] = q.ne[1] * q.ne[2] * q.ne[3];
    p.scratch_bytes = static_cast<size_t>(p.units[0]) * layout_of(call).per_unit;
  }
  return p;
}

// Additive mask of key j for query row (iq1, iq2, iq3), before the slope.
struct MaskRow {
  const TensorView* mask = nullptr;
  const char* row = nullptr;
  bool causal = false;
  int64_t last_visible = 0;  // causal: keys j <= last_visible are visible
  float at(int64_t j) const {
    if (mask) return load_f32(mask->type, row + j * static_cast<int64_t>(mask->nb[0]));
    return (causal && j > last_visible) ? -INFINITY : 0.0f;
  }
  // out[t] = slope * at(j0 + t) for t in [0, n), a contiguous src3 row converted as a whole.
  void values(int64_t j0, int64_t n, float slope, float* out) const {
    if (!mask) {
      const int64_t n_vis = causal ? std::clamp<int64_t>(last_visible - j0 + 1, 0, n) : n;
      std::fill(out, out + n_vis, slope * 0.0f);
      std::fill(out + n_vis, out + n, -INFINITY);
      return;
    }
    const int64_t nb0 = static_cast<int64_t>(mask->nb[0]);
    if (nb0 == static_cast<int64_t>(type_size(mask->type))) {
      quant_traits(mask->type)->to_float(row + j0 * nb0, out, n);
    } else {
      for (int64_t t = 0; t < n; ++t) out[t] = at(j0 + t);
    }
    for (int64_t t = 0; t < n; ++t) out[t] *= slope;
  }
};

// One past the last key a row sees (slope * mask not -inf), 0 when it sees none.
int64_t visible_end(const MaskRow& mask, float slope, int64_t n_kv) {
  if (!mask.mask) return mask.causal ? std::clamp<int64_t>(mask.last_visible + 1, 0, n_kv) : n_kv;
  int64_t end = n_kv;
  while (end > 0 && slope * mask.at(end - 1) == -INFINITY) --end;
  return end;
}

// The mask of query row (iq1, iq2, iq3): src3's row, or the causal rule.
MaskRow mask_row(const OpCall& call, int64_t iq1, int64_t iq2, int64_t iq3) {
  MaskRow mask;
  if (call.n_src == 4) {
    mask.mask = &call.src[3];
    mask.row = row_ptr(call.src[3], iq1, iq2 % call.src[3].ne[2], iq3 % call.src[3].ne[3]);
  } else {
    mask.causal = call.params.causal;
    mask.last_visible = call.params.q_pos0 + iq1;
  }
  return mask;
}

// w[0..n) <- softmax(w). ref: ggml_compute_forward_soft_max_f32: max, ggml_vec_soft_max_f32,
// then times (float)(1 / sum).
void softmax_plain(int64_t n, float* w) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max = fmax_of(max, w[j]);
  if (max == -INFINITY) {
    std::fill(w, w + n, 0.0f);
    return;
  }
  const float inv = static_cast<float>(1.0 / exp_sum_ggml(n, w, max));
  for (int64_t j = 0; j < n; ++j) w[j] *= inv;
}

// kqv = mul_mat(v^T, kq) for nq <= quant::kMaxQueries query rows with the same n_vis visible keys:
// out[qi][i] = sum over keys j < n_vis of w[qi][j] * v_j[i] (V F32, row j at v_plane + j * vb1).
// Per output i, key j goes to lane j % 16 of accumulator (j / 16) % n_acc by FMA. ref:
// llamafile_sgemm's tinyBLAS<16> (n_acc 1; ggml uses it for >= 2 queries) or ggml_vec_dot_f32
// (n_acc 4, GGML_F32_STEP 64; one query). Keys past n_vis are ggml's padding or masked:
// probability 0, no effect. So key j goes to slot j % n_slots, and each slot's row of dv
// accumulators takes its keys' FMAs in key order (quant::f32_mad_rows over the slot's keys, for
// all nq rows at once, their weights gathered into slot_w); zero weights are applied, as mul_mat
// applies them. Scratch per row: slot_w[qi] (n_vis floats), lanes[qi] (n_acc * 16 * dv floats).
void probs_times_v(int nq, int64_t n_vis, int64_t n_acc, int64_t dv, const float* const* w, const char* v_plane,
                   int64_t vb1, float* const* slot_w, float* const* lanes, float* const* out) {
  const int64_t n_slots = n_acc * kLanes;
  for (int qi = 0; qi < nq; ++qi) std::fill(lanes[qi], lanes[qi] + dv * n_slots, 0.0f);
  for (int64_t s = 0, at = 0; s < std::min(n_slots, n_vis); ++s) {
    const int64_t n_s = (n_vis - s + n_slots - 1) / n_slots;  // keys s, s + n_slots, ...
    float* ys[quant::kMaxQueries];
    const float* ws[quant::kMaxQueries];
    for (int qi = 0; qi < nq; ++qi) {
      for (int64_t m = 0; m < n_s; ++m) slot_w[qi][at + m] = w[qi][s + m * n_slots];
      ys[qi] = lanes[qi] + s * dv;
      ws[qi] = slot_w[qi] + at;
    }
    quant::f32_mad_rows(nq, n_s, dv, ys, v_plane + s * vb1, static_cast<size_t>(n_slots * vb1), DType::F32, ws,
                        /*skip_zero_weights=*/false);
    at += n_s;
  }
  for (int qi = 0; qi < nq; ++qi) {
    float* l = lanes[qi];
    if (n_acc == 4) {  // GGML_F32x16_REDUCE: (0 + 2) + (1 + 3), lane-wise, into the first 16 rows
      for (int64_t t = 0; t < kLanes; ++t)
        for (int64_t i = 0; i < dv; ++i)
          l[t * dv + i] = (l[t * dv + i] + l[(2 * kLanes + t) * dv + i]) +
                          (l[(kLanes + t) * dv + i] + l[(3 * kLanes + t) * dv + i]);
    }
    quant::reduce_add_16_rows(dv, l, dv, out[qi]);
  }
}

// The plain path with an F32 V for query rows [r0, r1) of head (iq2, iq3), kMaxQueries at a
// time (see takes_plain_block_path); each row's bits are those of its arithmetic alone.
// The scores: an F32 K's plane is transposed once and computed 8 keys at a time in lanes
// (quant::dot_cols_vec_dot_f32: F32's vec_dot's bits), other K types key by key by their vec_dot.
void run_plain_block(const OpCall& call, char* scratch, int64_t r0, int64_t r1, int64_t iq2, int64_t iq3,
                     float slope) {
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const TensorView& v = call.src[2];
  const int64_t dk = k.ne[0], dv = v.ne[0], n_kv = k.ne[1];
  const PlainBlockLayout l = plain_block_layout_of(call);
  const QuantTraits* kt = quant_traits(k.type);
  const char* k_plane = row_ptr(k, 0, iq2 / (q.ne[2] / k.ne[2]), iq3 / (q.ne[3] / k.ne[3]));
  const char* v_plane = row_ptr(v, 0, iq2 / (q.ne[2] / v.ne[2]), iq3 / (q.ne[3] / v.ne[3]));
  const int64_t kb1 = static_cast<int64_t>(k.nb[1]), vb1 = static_cast<int64_t>(v.nb[1]);
  const bool lanes_scores = k.type == DType::F32;
  float* k_t = reinterpret_cast<float*>(scratch);  // [dk][l.ld], lanes_scores only
  if (lanes_scores) {
    quant::transpose_rows_f32(n_kv, dk, k_plane, static_cast<size_t>(kb1), DType::F32, k_t, l.ld);
    for (int64_t e = 0; e < dk; ++e) std::fill(k_t + e * l.ld + n_kv, k_t + (e + 1) * l.ld, 0.0f);
  }
  void* q_conv[quant::kMaxQueries];
  float *w[quant::kMaxQueries], *slot_w[quant::kMaxQueries], *lanes[quant::kMaxQueries], *acc[quant::kMaxQueries];
  for (int r = 0; r < quant::kMaxQueries; ++r) {
    char* base = scratch + l.rows + static_cast<size_t>(r) * l.per_row;
    q_conv[r] = base;
    w[r] = reinterpret_cast<float*>(base + l.w);
    slot_w[r] = reinterpret_cast<float*>(base + l.slot_w);
    lanes[r] = reinterpret_cast<float*>(base + l.lanes);
    acc[r] = reinterpret_cast<float*>(base + l.acc);
  }
  for (int64_t g0 = r0; g0 < r1; g0 += quant::kMaxQueries) {
    const int nq = static_cast<int>(std::min<int64_t>(quant::kMaxQueries, r1 - g0));
    // Keys past a row's last visible one have probability 0 and change no sum (a padded KV
    // cache's cells, a causal row's future): they take no part in its softmax and sums.
    int64_t n_vis[quant::kMaxQueries], n_cols = 0;
    MaskRow mask[quant::kMaxQueries];
    for (int r = 0; r < nq; ++r) {
      kt->act_from_float(reinterpret_cast<const float*>(row_ptr(q, g0 + r, iq2, iq3)), q_conv[r], dk);
      mask[r] = mask_row(call, g0 + r, iq2, iq3);
      n_vis[r] = visible_end(mask[r], slope, n_kv);
      n_cols = std::max(n_cols, n_vis[r]);
    }
    if (lanes_scores) {
      quant::dot_cols_vec_dot_f32(nq, n_cols, dk, k_t, l.ld, reinterpret_cast<const float* const*>(q_conv), w);
    } else {
      for (int r = 0; r < nq; ++r)
        for (int64_t j = 0; j < n_vis[r]; ++j) kt->vec_dot(dk, &w[r][j], k_plane + j * kb1, q_conv[r]);
    }
    for (int r = 0; r < nq; ++r) {
      float* mv = slot_w[r];  // slope * mask of the row's keys, until probs_times_v fills slot_w
      mask[r].values(0, n_vis[r], slope, mv);
      for (int64_t j = 0; j < n_vis[r]; ++j) w[r][j] = w[r][j] * call.params.scale + mv[j];
      softmax_plain(n_vis[r], w[r]);
    }
    // Rows with the same visible keys (all of them, without a mask) pass over V together.
    for (int r = 0, e = 0; r < nq; r = e) {
      for (e = r + 1; e < nq && n_vis[e] == n_vis[r];) ++e;
      probs_times_v(e - r, n_vis[r], 1, dv, w + r, v_plane, vb1, slot_w + r, lanes + r, acc + r);
    }
    for (int r = 0; r < nq; ++r) {
      char* drow = row_ptr(call.dst, g0 + r, iq2, iq3);
      for (int64_t i = 0; i < dv; ++i) elem<float>(call.dst, drow, i) = acc[r][i];
    }
  }
}

// ref: ggml_compute_forward_flash_attn_ext_tiled, for query rows [r0, r0 + n_rows) of head (iq2,
// iq3) (at most kFaTileQ rows: they share each tile's K rows, transposed to F32 once, and each
// pass over its V rows by groups of quant::kMaxQueries; every row's arithmetic is its own, as if
// alone): F32 q, keys in tiles of kFaTileKv from 0; per tile kq = (sequential FMAs over dk) * scale
// + mask, a new running max rescales VKQ and S by expf(M_old - M), S += ggml_vec_soft_max_f32 of
// the tile, and VKQ accumulates p * v by sequential FMAs over the tile's keys (simd_gemm). Fully
// masked tiles are skipped; masked keys contribute exact zeros.
void run_tiled_block(const OpCall& call, char* scratch, int64_t r0, int64_t n_rows, int64_t iq2, int64_t iq3,
                     float slope) {
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const TensorView& v = call.src[2];
  const int64_t dk = k.ne[0], dv = v.ne[0], n_kv = k.ne[1];
  const TiledLayout l = tiled_layout_of(call);
  const char* k_plane = row_ptr(k, 0, iq2 / (q.ne[2] / k.ne[2]), iq3 / (q.ne[3] / k.ne[3]));
  const char* v_plane = row_ptr(v, 0, iq2 / (q.ne[2] / v.ne[2]), iq3 / (q.ne[3] / v.ne[3]));
  const int64_t kb1 = static_cast<int64_t>(k.nb[1]), vb1 = static_cast<int64_t>(v.nb[1]);
  const DType kv_type = k.type;
  const float scale = call.params.scale;
  float* kt = reinterpret_cast<float*>(scratch);
  const float* qf[kFaTileQ];
  float* kq[kFaTileQ];
  float* mv[kFaTileQ];
  float* acc[kFaTileQ];
  MaskRow mask[kFaTileQ];
  uint64_t visible[kFaTileQ];
  float S[kFaTileQ], M[kFaTileQ];
  for (int64_t r = 0; r < n_rows; ++r) {
    char* base = scratch + l.rows + static_cast<size_t>(r) * l.per_row;
    qf[r] = reinterpret_cast<const float*>(row_ptr(q, r0 + r, iq2, iq3));
    kq[r] = reinterpret_cast<float*>(base);
    mv[r] = reinterpret_cast<float*>(base + l.mask);
    acc[r] = reinterpret_cast<float*>(base + l.acc);
    mask[r] = mask_row(call, r0 + r, iq2, iq3);
    std::fill(acc[r], acc[r] + dv, 0.0f);
    S[r] = 0.0f;
    M[r] = -INFINITY;
  }
  for (int64_t t0 = 0; t0 < n_kv; t0 += kFaTileKv) {
    const int64_t nt = std::min(kFaTileKv, n_kv - t0);
    // The tile's keys some row sees lie in [lo, hi): only their dot products are computed (each
    // key's is its own chain, so which others are computed changes no bits; a masked key's is
    // replaced by -inf below). A causal prompt's later tiles are all masked: nothing computed.
    uint64_t any_visible = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
      mask[r].values(t0, nt, slope, mv[r]);
      visible[r] = quant::visible_bits(nt, mv[r]);
      any_visible |= visible[r];
    }
    if (any_visible == 0) continue;
    // whole groups of eight keys for the SIMD kernels (masked extras are harmless)
    const int64_t lo = std::countr_zero(any_visible) / 8 * 8;
    const int64_t hi = std::min<int64_t>(nt, (64 - std::countl_zero(any_visible) + 7) / 8 * 8);
    quant::transpose_rows_f32(hi - lo, dk, k_plane + (t0 + lo) * kb1, static_cast<size_t>(kb1), kv_type, kt,
                              kFaTileKv);
    for (int64_t g = 0; g < n_rows; g += quant::kMaxQueries) {
      const int nq = static_cast<int>(std::min<int64_t>(quant::kMaxQueries, n_rows - g));
      float* kq_lo[quant::kMaxQueries];
      for (int r = 0; r < nq; ++r) kq_lo[r] = kq[g + r] + lo;
      quant::dot_cols_sequential(nq, hi - lo, dk, kt, kFaTileKv, qf + g, kq_lo);
    }
    // The rows with a visible key in this tile take its values.
    int64_t n_live = 0;
    float* live_acc[kFaTileQ];
    const float* live_p[kFaTileQ];
    for (int64_t r = 0; r < n_rows; ++r) {
      if (visible[r] == 0) continue;
      const float tile_max = quant::scale_add_mask_max(nt, kq[r], scale, mv[r]);
      if (tile_max == -INFINITY) continue;
      const float m_new = fmax_of(M[r], tile_max);
      if (m_new > M[r]) {
        const float ms = std::exp(M[r] - m_new);
        for (int64_t i = 0; i < dv; ++i) acc[r][i] *= ms;
        S[r] *= ms;
      }
      M[r] = m_new;
      S[r] = static_cast<float>(static_cast<double>(S[r]) + exp_sum_ggml(nt, kq[r], M[r]));
      live_acc[n_live] = acc[r];
      live_p[n_live++] = kq[r];
    }
    // Masked keys (p exactly 0: fma(v, 0, acc) == acc) are skipped.
    for (int64_t g = 0; g < n_live; g += quant::kMaxQueries) {
      const int nq = static_cast<int>(std::min<int64_t>(quant::kMaxQueries, n_live - g));
      quant::f32_mad_rows(nq, nt, dv, live_acc + g, v_plane + t0 * vb1, static_cast<size_t>(vb1), kv_type,
                          live_p + g, /*skip_zero_weights=*/true);
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const float s_inv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
    char* drow = row_ptr(call.dst, r0 + r, iq2, iq3);
    for (int64_t i = 0; i < dv; ++i) elem<float>(call.dst, drow, i) = acc[r][i] * s_inv;
  }
}

void run_attention(const OpCall& call, int, int64_t begin, int64_t end, void* scratch) {
  const TensorView& q = call.src[0];
  const TensorView& k = call.src[1];
  const TensorView& v = call.src[2];
  const TensorView& d = call.dst;
  const int64_t dk = k.ne[0], dv = v.ne[0], n_kv = k.ne[1];
  const QuantTraits* kt = quant_traits(k.type);
  const ToFloatFn v_to_float =
      (v.type == DType::F32 || v.type == DType::F16) ? nullptr : quant_traits(v.type)->to_float;
  const AlibiSlopes slopes(call.params.max_bias, static_cast<uint32_t>(q.ne[2]));
  if (takes_tiled_path(call)) {  // unit: a block of kFaTileQ query rows of one head
    const int64_t n_blocks = n_tiled_blocks(q);
    const size_t per_unit = tiled_layout_of(call).per_unit;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t r0 = (u % n_blocks) * kFaTileQ;
      const int64_t iq2 = (u / n_blocks) % q.ne[2], iq3 = u / (n_blocks * q.ne[2]);
      run_tiled_block(call, static_cast<char*>(scratch) + static_cast<size_t>(u) * per_unit, r0,
                      std::min(kFaTileQ, q.ne[1] - r0), iq2, iq3, slopes(static_cast<uint32_t>(iq2)));
    }
    return;
  }
  if (takes_plain_block_path(call)) {  // unit: a run of query rows of one head
    const PlainBlockLayout l = plain_block_layout_of(call);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t r0 = (u % l.units_per_head) * l.rows_per_unit;
      const int64_t iq2 = (u / l.units_per_head) % q.ne[2], iq3 = u / (l.units_per_head * q.ne[2]);
      run_plain_block(call, static_cast<char*>(scratch) + static_cast<size_t>(u) * l.per_unit, r0,
                      std::min(q.ne[1], r0 + l.rows_per_unit), iq2, iq3, slopes(static_cast<uint32_t>(iq2)));
    }
    return;
  }
  const Layout l = layout_of(call);
  const float scale = call.params.scale;
  const bool flash = call.params.attn_path == AttentionPath::Flash;
  for (int64_t u = begin; u < end; ++u) {
    const int64_t iq1 = u % q.ne[1];
    const int64_t iq2 = (u / q.ne[1]) % q.ne[2];
    const int64_t iq3 = u / (q.ne[1] * q.ne[2]);
    char* base = static_cast<char*>(scratch) + u * static_cast<int64_t>(l.per_unit);
    void* q_conv = base + l.q_conv;
    float* acc = reinterpret_cast<float*>(base + l.acc);
    kt->act_from_float(reinterpret_cast<const float*>(row_ptr(q, iq1, iq2, iq3)), q_conv, dk);
    const char* k_plane = row_ptr(k, 0, iq2 / (q.ne[2] / k.ne[2]), iq3 / (q.ne[3] / k.ne[3]));
    const char* v_plane = row_ptr(v, 0, iq2 / (q.ne[2] / v.ne[2]), iq3 / (q.ne[3] / v.ne[3]));
    const int64_t kb1 = static_cast<int64_t>(k.nb[1]), vb1 = static_cast<int64_t>(v.nb[1]);
    const MaskRow mask = mask_row(call, iq1, iq2, iq3);
    const float slope = slopes(static_cast<uint32_t>(iq2));
    // Keys past the row's last visible one have probability 0 and change no sum (a padded KV
    // cache's cells, a causal row's future): they are not computed.
    const int64_t n_vis = visible_end(mask, slope, n_kv);
    if (!flash) {
      float* w = reinterpret_cast<float*>(base + l.scores);
      for (int64_t j = 0; j < n_vis; ++j) {
        float s;
        kt->vec_dot(dk, &s, k_plane + j * kb1, q_conv);
        w[j] = s * scale + slope * mask.at(j);
      }
      if (v.type == DType::F16) {
        softmax_in_place(n_vis, [w](int64_t j) -> float& { return w[j]; });
        std::fill(acc, acc + dv, 0.0f);
        for (int64_t j = 0; j < n_vis; ++j) {
          const char* vr = v_plane + j * vb1;
          const float p = f16_to_f32(f32_to_f16(w[j]));
          for (int64_t i = 0; i < dv; ++i) acc[i] += p * load_f32(DType::F16, vr + 2 * i);
        }
      } else {  // one query row: ggml_vec_dot_f32's four accumulators
        float* slot_w = reinterpret_cast<float*>(base + l.slot_w);
        float* lanes = reinterpret_cast<float*>(base + l.lanes);
        softmax_plain(n_vis, w);
        probs_times_v(1, n_vis, 4, dv, &w, v_plane, vb1, &slot_w, &lanes, &acc);
      }
    } else {
      uint16_t* acc16 = reinterpret_cast<uint16_t*>(base + l.acc16);
      float* vrow = reinterpret_cast<float*>(base + l.vrow);
      const bool v16 = v.type == DType::F16;
      if (v16) {
        std::fill(acc16, acc16 + dv, f32_to_f16(0.0f));
      } else {
        std::fill(acc, acc + dv, 0.0f);
      }
      float S = 0.0f;
      float M = -INFINITY;
      // Keys in blocks of kFaTileKv: the scores and the running maximum key by key, then (F16 V)
      // the block's updates of VKQ16 in one pass that keeps it in registers (each element's
      // updates are the same, in the same order).
      auto* keys = reinterpret_cast<quant::F16Key*>(base + l.keys);
      float* block_mask = reinterpret_cast<float*>(base + l.scores);  // slope * mask of the block's keys
      for (int64_t t0 = 0; t0 < n_vis; t0 += kFaTileKv) {
        const int64_t t1 = std::min(n_vis, t0 + kFaTileKv);
        mask.values(t0, t1 - t0, slope, block_mask);
        int64_t n_live = 0;
        // The visible keys in order (a key whose mask is -inf is skipped).
        for (uint64_t bits = quant::visible_bits(t1 - t0, block_mask); bits != 0; bits &= bits - 1) {
          const int64_t j = t0 + std::countr_zero(bits);
          const float mv = block_mask[j - t0];
          float s;
          kt->vec_dot(dk, &s, k_plane + j * kb1, q_conv);
          s = s * scale + mv;
          const float m_old = M;
          float ms = 1.0f;  // rescale of the accumulator on a new maximum
          float vs = 1.0f;  // e^(s - M)
          if (s > M) {
            M = s;
            ms = std::exp(m_old - M);
          } else {
            vs = std::exp(s - M);
          }
          if (v16) {
            keys[n_live++] = {static_cast<int32_t>(j - t0), ms, vs};
          } else {
            const char* vr = v_plane + j * vb1;
            if (ms != 1.0f) {
              for (int64_t i = 0; i < dv; ++i) acc[i] *= ms;
            }
            const float* vf = reinterpret_cast<const float*>(vr);
            if (v_to_float) {
              v_to_float(vr, vrow, dv);
              vf = vrow;
            }
            for (int64_t i = 0; i < dv; ++i) acc[i] = std::fma(vf[i], vs, acc[i]);
          }
          S = S * ms + vs;
        }
        if (v16) quant::f16_mad_keys(n_live, keys, dv, acc16, v_plane + t0 * vb1, static_cast<size_t>(vb1));
      }
      if (v16) {
        for (int64_t i = 0; i < dv; ++i) acc[i] = f16_to_f32(acc16[i]);
      }
      const float s_inv = S == 0.0f ? 0.0f : 1.0f / S;
      for (int64_t i = 0; i < dv; ++i) acc[i] *= s_inv;
    }
    char* drow = row_ptr(d, iq1, iq2, iq3);
    for (int64_t i = 0; i < dv; ++i) elem<float>(d, drow, i) = acc[i];
  }
}

}  // namespace

const KernelFns kAttentionKernel{check_attention, plan_attention, run_attention};

}  // namespace kiln::ops
