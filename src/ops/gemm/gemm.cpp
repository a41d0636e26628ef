// The family table of gemm.h: which kernels multiply which weights on this CPU, and the generic
// families over quant.h's dot products (types without a tile kernel of their own).
#include "ops/gemm/gemm.h"


#include "core/check.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"
#include "ops/quant/quant.h"

namespace kiln::gemm {
namespace {

// Activation format ids (Family::act_id).
enum : int {
  kActQ8_0 = 1,             // ActQ8_0
  kActF16Wide = 2,          // convert_act_f16_wide
  kActQ8_0Abs = 3,          // ActQ8_0Abs
  kActBF16Wide = 4,         // convert_act_bf16_wide
  kActF16Split16 = 5,       // convert_act_f16_split16
  kActBF16Split16 = 6,      // convert_act_bf16_split16
  kActF32Split16 = 7,       // convert_act_f32_split16
  kActNative = 16,          // + the vec_dot_type's id: quant.h's act_from_float
};

bool is_2d(const TensorView& w) { return w.ne[2] == 1 && w.ne[3] == 1; }
bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

// ggml repacks 2-D Q4_0, IQ4_NL and Q4_K weights with a multiple of 8 rows on AVX2 CPUs and
// multiplies them in its 8-row kernels' order (quant.h vec_dot_rows8).
bool rows8_order(const TensorView& w) {
  const QuantTraits* t = quant_traits(w.type);
  return t != nullptr && t->vec_dot_rows8 != nullptr && w.ne[1] % 8 == 0 && is_2d(w);
}

const char* act_at(const Tile& t, int64_t r) { return t.act + static_cast<size_t>(r) * t.act_stride; }
const char* row_at(const Tile& t, int64_t i) { return t.w + static_cast<size_t>(i) * t.w_stride; }

// The type's vec_dot for every output.
void run_vec_dot(const Tile& t) {
  const QuantTraits* q = quant_traits(t.type);
  for (int64_t r = 0; r < t.n_act; ++r)
    for (int64_t i = 0; i < t.n_rows; ++i) q->vec_dot(t.k, out_ptr(t, r, i), row_at(t, i), act_at(t, r));
}

// Plain weights in the rows8 orders: one output at a time (the prompt kernel's order for the
// n_gemm_act rows), or tiles of 8 weight rows x 4 activation rows where the type has such a kernel
// (Q4_0 and IQ4_NL, whose prompt and one-token orders are one).
void run_rows8(const Tile& t) {
  const QuantTraits* q = quant_traits(t.type);
  int64_t r = 0;
  if (q->vec_dot_rows8_x4_8x4 != nullptr && t.dst_col_stride == sizeof(float) && t.n_rows % 8 == 0) {
    for (; r + 4 <= t.n_act; r += 4)
      for (int64_t i = 0; i < t.n_rows; i += 8)
        q->vec_dot_rows8_x4_8x4(t.k, out_ptr(t, r, i), t.dst_row_stride, row_at(t, i), t.w_stride,
                                act_at(t, r), t.act_stride);
  }
  for (; r < t.n_act; ++r) {
    const VecDotFn dot = r < t.n_gemm_act ? q->vec_dot_rows8_x4 : q->vec_dot_rows8;
    for (int64_t i = 0; i < t.n_rows; ++i) dot(t.k, out_ptr(t, r, i), row_at(t, i), act_at(t, r));
  }
}

// ggml's repacked 4-row gemms take the first n - n % 4 rows of a product (the others go through
// its one-row gemv); families whose orders do not depend on it ignore the count.
int64_t gemm_rows_by_four(const TensorView&, int64_t n) { return n - n % 4; }

// tinyBLAS (llamafile_sgemm, AVX-512F build) takes F16, BF16 and F32 products of two rows or more
// whose rows are whole 16-value steps and whose weights have a multiple of 4 rows (its tiles);
// ggml's vec_dot the rest.
int64_t tinyblas_rows(const TensorView& w, int64_t n) {
  return n >= 2 && w.ne[0] % 16 == 0 && w.ne[1] % 4 == 0 ? n : 0;
}

// ggml's IQ panel gemm (ggml-cpu/iqp.cpp, AVX2 CPUs; ggml_cpu_iqp_supports_mul_mat) takes whole
// products of 8 rows or more (GGML_IQP_MIN_BATCH) whose weights are 2-D, contiguous and a multiple
// of 8 rows (k is whole super-blocks by the type); its vec_dot the rest. (It also asks for F32
// activations of at most 3 dimensions and contiguous F32 outputs, which kiln's mul_mat of model
// weights always has.) The GGML_NO_IQ_PANEL environment variable that turns it off is not followed.
int64_t iq_panel_rows(const TensorView& w, int64_t n) {
  return n >= 8 && w.ne[1] % 8 == 0 && is_2d(w) && w.is_contiguous() ? n : 0;
}

// Float weights (F16, BF16, F32; elements T) in the type's vec_dot order (Dot), output by output,
// for activation rows r0 .. n_act - 1, on their activations' vec_dot_type copy (kWide: after the
// widened one, the plain F16 and BF16 families; else the row itself).
template <class T, bool kWide, void (*Dot)(int64_t, float*, const T*, const T*)>
void vec_dot_rows(const Tile& t, int64_t r0) {
  const size_t native = kWide ? static_cast<size_t>(t.k) * sizeof(float) : 0;
  for (int64_t r = r0; r < t.n_act; ++r)
    for (int64_t i = 0; i < t.n_rows; ++i)
      Dot(t.k, out_ptr(t, r, i), reinterpret_cast<const T*>(row_at(t, i)),
          reinterpret_cast<const T*>(act_at(t, r) + native));
}

// Float weights: the n_gemm_act rows in tinyBLAS's order (Prompt), the others in the type's vec_dot
// order (Rows: vec_dot_rows, or for the Split16 layout on AVX2 CPUs the kernels that give its bits
// reading each weight row once for several activation rows). Plain rows on AVX2 CPUs, and rows in
// the Split16 layout with split activations (Prompt and Rows the split kernels).
template <void (*Prompt)(const Tile&), void (*Rows)(const Tile&, int64_t)>
void run_float(const Tile& t) {
  Tile prompt = t;
  prompt.n_act = t.n_gemm_act;
  if (prompt.n_act > 0) Prompt(prompt);
  if (t.n_gemm_act < t.n_act) Rows(t, t.n_gemm_act);
}

// Without AVX2 ggml takes every float row through its vec_dot.
int64_t no_gemm_rows(const TensorView&, int64_t) { return 0; }

// Plain weights whose AVX2 tile kernel keeps the type's AVX2 vec_dot order (layouts.h), and the
// AVX-512 kernel with the same bits where there is one.
struct VecDotTile {
  DType type;
  const char* name;
  void (*run)(const Tile&);
  void (*run_avx512)(const Tile&);
};
constexpr VecDotTile vec_dot_tiles[] = {
    {DType::Q5_0, "q5_0", gemm_q5_0_avx2, gemm_q5_0_avx512},
    {DType::Q4_1, "q4_1", gemm_q4_1_avx2, gemm_q4_1_avx512},
    {DType::Q5_1, "q5_1", gemm_q5_1_avx2, gemm_q5_1_avx512},
    {DType::Q6_K, "q6_K", gemm_q6_K_avx2, gemm_q6_K_avx512},
    {DType::Q5_K, "q5_K", gemm_q5_K_avx2, gemm_q5_K_avx512},
    {DType::Q3_K, "q3_K", gemm_q3_K_avx2, gemm_q3_K_avx512},
    {DType::Q2_K, "q2_K", gemm_q2_K_avx2, gemm_q2_K_avx512},
};

// One family per type for the generic paths (their act format is the type's vec_dot_type).
struct Table {
  Family vec_dot[kDTypeIdLimit];
  Family rows8[kDTypeIdLimit];
  // AVX2 CPUs: tile families over plain rows in the type's AVX2 vec_dot order (vec_dot_tiles).
  Family tiles[kDTypeIdLimit] = {};
  Family q4_0x8, q4_Kx8, q8_0x8, q8_0, f16, bf16, f32;
  Family f16_split16, bf16_split16, f32_split16;
  Family iq4_xs;

  Table() {
    const bool avx2 = quant::cpu_has_avx2();
    const bool avx512 = quant::cpu_has_avx512_vnni();
    for (uint32_t id = 0; id < kDTypeIdLimit; ++id) {
      const QuantTraits* q = quant_traits(static_cast<DType>(id));
      if (q == nullptr || q->vec_dot == nullptr) continue;
      const DType at = q->vec_dot_type;
      const int act = kActNative + static_cast<int>(at);
      vec_dot[id] = {"vec_dot",         act, block_size(at), type_size(at),
                     q->act_from_float, 1,   run_vec_dot,    gemm_rows_by_four};
      rows8[id] = {"rows8",           act, block_size(at), type_size(at),
                   q->act_from_float, 8,   run_rows8,      gemm_rows_by_four};
    }
    const size_t q8_0 = sizeof(ActQ8_0);
    this->q4_0x8 = {
        "q4_0x8",         kActQ8_0, 32, q8_0, convert_act_q8_0, 8,
        avx512 ? gemm_q4_0x8_avx512 : avx2 ? gemm_q4_0x8_avx2 : gemm_q4_0x8,
        gemm_rows_by_four};
    q4_Kx8 = {"q4_Kx8",
              kActNative + static_cast<int>(DType::Q8_K),
              256,
              type_size(DType::Q8_K),
              quant_traits(DType::Q8_K)->from_float,
              8,
              avx512 ? gemm_q4_Kx8_avx512 : avx2 ? gemm_q4_Kx8_avx2 : gemm_q4_Kx8,
              gemm_rows_by_four};
    q8_0x8 = {"q8_0x8",
              kActQ8_0Abs,
              32,
              sizeof(ActQ8_0Abs),
              convert_act_q8_0_abs,
              8,
              avx512 ? gemm_q8_0x8_avx512 : avx2 ? gemm_q8_0x8_avx2 : gemm_q8_0x8,
              gemm_rows_by_four};
    // AVX2 CPUs only:
    this->q8_0 = {"q8_0", kActQ8_0, 32, q8_0, convert_act_q8_0, 1, avx512 ? gemm_q8_0_avx512 : gemm_q8_0_avx2,
                  gemm_rows_by_four};
    // The vec_dot tiles: the activations of their vec_dot family (shared conversion).
    for (const auto& [type, name, run_avx2, run_avx512] : vec_dot_tiles) {
      const Family& v = vec_dot[static_cast<uint32_t>(type)];
      const auto run = avx512 && run_avx512 != nullptr ? run_avx512 : run_avx2;
      tiles[static_cast<uint32_t>(type)] = {name,          v.act_id, v.act_block, v.act_block_bytes,
                                            v.convert_act, 1,        run,         gemm_rows_by_four};
    }
    // IQ4_XS: the activations of its vec_dot family; ggml's IQ panel rows take the panel order.
    const Family& iq = vec_dot[static_cast<uint32_t>(DType::IQ4_XS)];
    iq4_xs = {"iq4_xs",       iq.act_id,
              iq.act_block,   iq.act_block_bytes,
              iq.convert_act, 1,
              avx512 ? gemm_iq4_xs_avx512 : gemm_iq4_xs_avx2, iq_panel_rows};
    // The float types: one value per block, tinyBLAS's rows (AVX2 CPUs; without AVX2 the split
    // layout's rows all take the portable vec_dot's order, as plain rows do).
    auto float_family = [](const char* name, int act_id, size_t act_bytes,
                           void (*convert)(const float*, void*, int64_t), void (*run)(const Tile&),
                           int64_t (*gemm_rows)(const TensorView&, int64_t)) {
      return Family{name, act_id, 1, act_bytes, convert, 1, run, gemm_rows};
    };
    const size_t wide = sizeof(float) + sizeof(uint16_t);
    using quant::vec_dot_bf16_avx2, quant::vec_dot_f16_avx2, quant::vec_dot_f32_avx2;
    f16 = float_family("f16", kActF16Wide, wide, convert_act_f16_wide_avx2,
                       run_float<gemm_f16_avx2, vec_dot_rows<uint16_t, true, vec_dot_f16_avx2>>, tinyblas_rows);
    bf16 = float_family("bf16", kActBF16Wide, wide, convert_act_bf16_wide_avx2,
                        run_float<gemm_bf16_avx2, vec_dot_rows<uint16_t, true, vec_dot_bf16_avx2>>, tinyblas_rows);
    f32 = float_family("f32", kActNative + static_cast<int>(DType::F32), sizeof(float),
                       quant_traits(DType::F32)->act_from_float,
                       run_float<gemm_f32_avx2, vec_dot_rows<float, false, vec_dot_f32_avx2>>, tinyblas_rows);
    const size_t half = sizeof(uint16_t);
    using quant::vec_dot_bf16_split16, quant::vec_dot_f16_split16, quant::vec_dot_f32_split16;
    if (avx2) {
      // The one-row order, several activation rows per weight read (split16_rows_avx2.cpp).
      f16_split16 = float_family("f16_split16", kActF16Split16, half, convert_act_f16_split16_avx2,
                                 run_float<gemm_f16_split16_avx2, rows_f16_split16_avx2>, tinyblas_rows);
      bf16_split16 = float_family("bf16_split16", kActBF16Split16, half, convert_act_bf16_split16_avx2,
                                  run_float<gemm_bf16_split16_avx2, rows_bf16_split16_avx2>, tinyblas_rows);
      f32_split16 = float_family("f32_split16", kActF32Split16, sizeof(float), convert_act_f32_split16,
                                 run_float<gemm_f32_split16_avx2, rows_f32_split16_avx2>, tinyblas_rows);
    } else {
      f16_split16 = float_family("f16_split16", kActF16Split16, half, convert_act_f16_split16,
                                 run_float<gemm_f16_split16, vec_dot_rows<uint16_t, false, vec_dot_f16_split16>>,
                                 no_gemm_rows);
      bf16_split16 = float_family("bf16_split16", kActBF16Split16, half, convert_act_bf16_split16,
                                  run_float<gemm_bf16_split16, vec_dot_rows<uint16_t, false, vec_dot_bf16_split16>>,
                                  no_gemm_rows);
      f32_split16 = float_family("f32_split16", kActF32Split16, sizeof(float), convert_act_f32_split16,
                                 run_float<gemm_f32_split16, vec_dot_rows<float, false, vec_dot_f32_split16>>,
                                 no_gemm_rows);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

bool supported(const TensorView& w) {
  switch (w.layout) {
    case TensorLayout::Plain: {
      const QuantTraits* q = quant_traits(w.type);
      return q != nullptr && q->vec_dot != nullptr;
    }
    case TensorLayout::Q4_0x8:
      return w.type == DType::Q4_0 && is_2d(w) && w.ne[1] % 8 == 0;
    case TensorLayout::Q4_Kx8:
      return w.type == DType::Q4_K && is_2d(w) && w.ne[1] % 8 == 0;
    case TensorLayout::Q8_0x8:
      return w.type == DType::Q8_0 && is_2d(w) && w.ne[1] % 8 == 0;
    case TensorLayout::Split16:
      return is_float(w.type) && is_2d(w) && w.ne[0] % 16 == 0;
  }
  return false;
}

const Family& family_for(const TensorView& w) {
  KILN_ASSERT(supported(w), "gemm: no family for these weights");
  const Table& tb = table();
  if (w.layout == TensorLayout::Q4_0x8) return tb.q4_0x8;
  if (w.layout == TensorLayout::Q4_Kx8) return tb.q4_Kx8;
  if (w.layout == TensorLayout::Q8_0x8) return tb.q8_0x8;
  if (w.layout == TensorLayout::Split16)
    return w.type == DType::F16 ? tb.f16_split16 : w.type == DType::BF16 ? tb.bf16_split16 : tb.f32_split16;
  // Q8_0's tile kernel and the vec_dot tiles have the AVX2 vec_dot's order; without AVX2 the type's
  // vec_dot keeps its own.
  const auto id = static_cast<uint32_t>(w.type);
  if (w.type == DType::Q8_0 && quant::cpu_has_avx2()) return tb.q8_0;
  if (tb.tiles[id].run != nullptr && quant::cpu_has_avx2()) return tb.tiles[id];
  // IQ4_XS's tile has the AVX2 vec_dot's order for the rows outside ggml's IQ panel gemm.
  if (w.type == DType::IQ4_XS && quant::cpu_has_avx2()) return tb.iq4_xs;
  // So do the float types' prompt kernels (without AVX2 every row keeps the vec_dot's order).
  if (quant::cpu_has_avx2()) {
    if (w.type == DType::F16) return tb.f16;
    if (w.type == DType::BF16) return tb.bf16;
    if (w.type == DType::F32) return tb.f32;
  }
  return rows8_order(w) ? tb.rows8[id] : tb.vec_dot[id];
}

TensorLayout preferred_layout(const TensorView& w) {
  if (!quant::cpu_has_avx2() || !is_2d(w) || w.ne[1] % 8 != 0) return TensorLayout::Plain;
  if (w.type == DType::Q4_0) return TensorLayout::Q4_0x8;
  if (w.type == DType::Q4_K) return TensorLayout::Q4_Kx8;
  // Q8_0 weights without the level -128 (layouts.h): a scan of the plain bytes, so the choice is
  // still a pure function of them.
  if (w.type == DType::Q8_0 && w.data != nullptr && w.is_contiguous() &&
      !q8_0_has_level_min(static_cast<const char*>(w.data), w.nb[1], w.ne[1], w.ne[0]))
    return TensorLayout::Q8_0x8;
  // Float weights whose products tinyBLAS takes (tinyblas_rows): its order reads the split rows
  // at full speed.
  if (is_float(w.type) && w.ne[0] % 16 == 0) return TensorLayout::Split16;
  return TensorLayout::Plain;
}

size_t prepared_bytes(const TensorView& w, TensorLayout layout) {
  switch (layout) {
    case TensorLayout::Plain:
      return w.span_bytes();
    case TensorLayout::Q4_0x8:
    case TensorLayout::Q8_0x8:
    case TensorLayout::Split16:
      return static_cast<size_t>(w.ne[1]) * row_size(w.type, w.ne[0]);
    case TensorLayout::Q4_Kx8:
      return static_cast<size_t>(w.ne[1] / 8) * static_cast<size_t>(w.ne[0] / 256) * kQ4_Kx8SuperBytes;
  }
  return 0;
}

void prepare(const TensorView& w, TensorLayout layout, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  const auto* rows = static_cast<const char*>(w.data);
  switch (layout) {
    case TensorLayout::Plain:
      __builtin_memcpy(out, rows, w.span_bytes());
      return;
    case TensorLayout::Q4_0x8:
      prepare_q4_0x8(rows, w.nb[1], w.ne[1], w.ne[0], out);
      return;
    case TensorLayout::Q4_Kx8:
      prepare_q4_Kx8(rows, w.nb[1], w.ne[1], w.ne[0], out);
      return;
    case TensorLayout::Q8_0x8:
      prepare_q8_0x8(rows, w.nb[1], w.ne[1], w.ne[0], out);
      return;
    case TensorLayout::Split16:
      prepare_split16(rows, w.nb[1], w.ne[1], w.ne[0], type_size(w.type), out);
      return;
  }
}

}  // namespace kiln::gemm
