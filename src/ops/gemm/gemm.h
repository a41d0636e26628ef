// The matrix kernels behind mul_mat (internal to src/ops): one family per weight type and layout.
//
// mul_mat converts each F32 activation row once into the family's activation format (phase 0),
// then computes tiles of weight rows x activation rows (phase 1). Each output's float order
// depends on nothing but the weight row and the activation row (not on the tile or the thread
// split) and, for one type, on whether ggml sends the row through its prompt kernel
// (Tile::n_gemm_act). So with params.single_row_order a row's result does not depend on the batch
// it travels in (docs/performance.md, "Prepared weights"), which speculative decoding relies on.
// The orders:
//   Q4_0, IQ4_NL (8k rows)  ggml's repacked 8-row kernels (vec_dot_rows8.cpp), for one token and
//                           for prompts alike, as llama.cpp on AVX2 CPUs;
//   Q4_K (8k rows)          ggml's repacked kernels: the one-token order (one FMA per super-block),
//                           and for the n_gemm_act rows the prompt kernel's (folds every 64 values),
//                           in the prepared Q4_Kx8 layout (AVX2 CPUs) and the plain one alike;
//   Q8_0 (AVX2 CPUs)        ggml's AVX2 vec_dot (eight lane sums, reduced at the end), in tiles
//                           of plain rows and in the prepared Q8_0x8 layout alike;
//   Q6_K, Q5_K, Q3_K, Q2_K, the type's AVX2 vec_dot (quant.h: eight lane sums; Q4_1, Q5_1 and
//   Q5_0, Q4_1, Q5_1        Q2_K add a min sum at the end), in tiles of plain rows: llama.cpp on
//   (AVX2 CPUs)             AVX2 CPUs runs ggml's vec_dots for every batch size (tinyBLAS's Q5_0
//                           prompt kernel has the vec_dot's order), and kiln's have their orders
//                           except Q2_K's (layouts.h gemm_q2_K);
//   IQ4_XS (AVX2 CPUs)      the n_gemm_act rows in ggml's IQ panel order (iqp.cpp: one FMA per
//                           super-block into one sum), the others in its AVX2 vec_dot's;
//   F16, BF16, F32          the n_gemm_act rows in tinyBLAS's prompt order (sixteen lane sums,
//   (AVX2 CPUs)             reduced at the end; layouts.h gemm_f16), the others (one-token
//                           products, single_row_order) in the type's vec_dot order, in the
//                           prepared Split16 layout (several activation rows per weight read,
//                           split16_rows_avx2.cpp) and the plain one alike;
//   others                  the type's vec_dot (quant.h) for every batch size.
// Families with a prepared layout (TensorLayout) read weights that ops/weight_prep.h wrote; the
// same family reads the plain tensor with the same order where shapes allow, so prepared and plain
// weights give identical bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_view.h"

namespace kiln::gemm {

// One tile of a product: out(i, r) = dot(weight row i, activation row r) for i < n_rows,
// r < n_act, stored at (char*)dst + r * dst_row_stride + i * dst_col_stride.
struct Tile {
  DType type = DType::F32;    // the weights' type
  int64_t k = 0;              // values per row
  const char* w = nullptr;    // plain: weight row 0 of the tile; prepared: its first row group
  size_t w_stride = 0;        // bytes between weight rows (plain) or row groups (prepared)
  int64_t n_rows = 0;         // a multiple of the family's row_group, except at a tensor's end
  const char* act = nullptr;  // converted activation row 0
  size_t act_stride = 0;      // bytes between converted activation rows
  int64_t n_act = 0;
  float* dst = nullptr;
  size_t dst_row_stride = 0;  // bytes between activation rows' outputs
  size_t dst_col_stride = 0;  // bytes between consecutive weight rows' outputs
  // The first n_gemm_act activation rows are among those ggml multiplies with its prompt kernels
  // (Family::gemm_act_rows; none with params.single_row_order): families whose prompt order
  // differs from their one-row order give these rows the prompt order.
  int64_t n_gemm_act = 0;
};

struct Family {
  const char* name;
  // Families that convert activations identically share an id (mul_mats of one input then
  // convert it once).
  int act_id;
  int64_t act_block;       // a converted activation row has k / act_block blocks ...
  size_t act_block_bytes;  // ... of this many bytes
  void (*convert_act)(const float* x, void* dst, int64_t k);
  int64_t row_group;  // tiles start at multiples of it; prepared layouts' groups are this many rows
  void (*run)(const Tile& tile);
  // How many of a product's n activation rows (the first ones, per plane of `w`) ggml multiplies
  // with its prompt kernel: n - n % 4 for its repacked 4-row gemms; all n for tinyBLAS (n >= 2
  // and shapes it takes) and for the IQ panel gemm (n >= 8 and shapes it takes), else none.
  int64_t (*gemm_act_rows)(const TensorView& w, int64_t n);
};

inline size_t act_row_bytes(const Family& f, int64_t k) {
  return static_cast<size_t>(k / f.act_block) * f.act_block_bytes;
}

// The family that multiplies `w` (src0 of a mul_mat: plain or prepared) on this CPU. Always one;
// callers check types with supported().
const Family& family_for(const TensorView& w);
bool supported(const TensorView& w);

// Prepared layouts (ops/weight_prep.h).
// The layout mul_mat reads fastest for a 2-D weight of this type and shape on this CPU.
TensorLayout preferred_layout(const TensorView& w);
// Bytes of `w` in `layout` (w.span_bytes() for Plain).
size_t prepared_bytes(const TensorView& w, TensorLayout layout);
// Writes contiguous plain `w` in `layout` to dst (prepared_bytes of it). Requires layout to be
// preferred_layout(w) or Plain.
void prepare(const TensorView& w, TensorLayout layout, void* dst);

// Stores eight consecutive outputs of one activation row (i .. i + 7 from p).
inline void store8(const Tile& t, int64_t r, int64_t i, const float v[8]) {
  char* p = reinterpret_cast<char*>(t.dst) + static_cast<size_t>(r) * t.dst_row_stride +
            static_cast<size_t>(i) * t.dst_col_stride;
  for (int j = 0; j < 8; ++j) *reinterpret_cast<float*>(p + static_cast<size_t>(j) * t.dst_col_stride) = v[j];
}
inline float* out_ptr(const Tile& t, int64_t r, int64_t i) {
  return reinterpret_cast<float*>(reinterpret_cast<char*>(t.dst) + static_cast<size_t>(r) * t.dst_row_stride +
                                  static_cast<size_t>(i) * t.dst_col_stride);
}

}  // namespace kiln::gemm
