// The traits table (quant.h) and quantize_chunk: binds each format's kernels, choosing SIMD
// variants once, at first use, from the running CPU's features.
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/quant.h"

namespace kiln {
namespace {

using namespace quant;

// Adapters from typed kernels to the type-erased signatures of QuantTraits.
template <class Block, void (*F)(const Block*, float*, int64_t)>
void to_float_fn(const void* src, float* dst, int64_t n) {
  F(static_cast<const Block*>(src), dst, n);
}
template <class Block, void (*F)(const float*, Block*, int64_t)>
void from_float_fn(const float* src, void* dst, int64_t n) {
  F(src, static_cast<Block*>(dst), n);
}
template <class W, class A, void (*F)(int64_t, float*, const W*, const A*)>
void vec_dot_fn(int64_t n, float* out, const void* w, const void* a) {
  F(n, out, static_cast<const W*>(w), static_cast<const A*>(a));
}

template <class W, class A, void (*F)(int64_t, float*, size_t, const W*, size_t, const A*, size_t)>
void vec_dot_tile_fn(int64_t n, float* out, size_t out_stride, const void* w, size_t w_stride, const void* a,
                     size_t a_stride) {
  F(n, out, out_stride, static_cast<const W*>(w), w_stride, static_cast<const A*>(a), a_stride);
}

void f32_to_float(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f32_from_float(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

struct Table {
  QuantTraits entries[kDTypeIdLimit];
  bool present[kDTypeIdLimit] = {};

  void add(QuantTraits t) {
    const auto id = static_cast<uint32_t>(t.type);
    entries[id] = t;
    present[id] = true;
  }

  Table() {
    const bool avx2 = cpu_has_avx2();
    const bool avx512 = cpu_has_avx512_vnni();
#define KILN_TO_FLOAT(B, F) &to_float_fn<B, F>
#define KILN_FROM_FLOAT(B, F) &from_float_fn<B, F>
#define KILN_VEC_DOT(W, A, F) &vec_dot_fn<W, A, F>
// The widest level's F##_avx512, F##_avx2 or F (same bits at every SIMD level).
#define KILN_VEC_DOT_LEVELS(W, A, F) \
  (avx512 ? KILN_VEC_DOT(W, A, F##_avx512) : avx2 ? KILN_VEC_DOT(W, A, F##_avx2) : KILN_VEC_DOT(W, A, F))
    add({DType::F32, DType::F32, &f32_to_float, &f32_from_float, nullptr,
         avx2 ? KILN_VEC_DOT(float, float, vec_dot_f32_avx2) : KILN_VEC_DOT(float, float, vec_dot_f32),
         KILN_VEC_DOT(float, float, vec_dot_f32)});
    add({DType::F16, DType::F16,
         avx2 ? KILN_TO_FLOAT(uint16_t, f16_to_f32_row_avx2) : KILN_TO_FLOAT(uint16_t, f16_to_f32_row),
         avx2 ? KILN_FROM_FLOAT(uint16_t, f32_to_f16_row_avx2) : KILN_FROM_FLOAT(uint16_t, f32_to_f16_row),
         nullptr,
         avx2 ? KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_f16_avx2)
              : KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_f16),
         KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_f16)});
    add({DType::BF16, DType::BF16, KILN_TO_FLOAT(uint16_t, bf16_to_f32_row),
         KILN_FROM_FLOAT(uint16_t, f32_to_bf16_row), nullptr,
         avx2 ? KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_bf16_avx2)
              : KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_bf16),
         KILN_VEC_DOT(uint16_t, uint16_t, vec_dot_bf16)});
    add({DType::Q8_0, DType::Q8_0, KILN_TO_FLOAT(BlockQ8_0, dequantize_row_q8_0),
         avx2 ? KILN_FROM_FLOAT(BlockQ8_0, quantize_row_q8_0_x86_avx2)
              : KILN_FROM_FLOAT(BlockQ8_0, quantize_row_q8_0_x86),
         nullptr,
         avx2 ? KILN_VEC_DOT(BlockQ8_0, BlockQ8_0, vec_dot_q8_0_q8_0_avx2)
              : KILN_VEC_DOT(BlockQ8_0, BlockQ8_0, vec_dot_q8_0_q8_0),
         KILN_VEC_DOT(BlockQ8_0, BlockQ8_0, vec_dot_q8_0_q8_0)});
    add({DType::Q8_1, DType::Q8_1, KILN_TO_FLOAT(BlockQ8_1, dequantize_row_q8_1),
         avx2 ? KILN_FROM_FLOAT(BlockQ8_1, quantize_row_q8_1_x86_avx2)
              : KILN_FROM_FLOAT(BlockQ8_1, quantize_row_q8_1_x86),
         nullptr, nullptr, nullptr});
    add({DType::Q8_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ8_K, dequantize_row_q8_K),
         avx2 ? KILN_FROM_FLOAT(BlockQ8_K, quantize_row_q8_K_avx2)
              : KILN_FROM_FLOAT(BlockQ8_K, quantize_row_q8_K_ref),
         nullptr, nullptr, nullptr});
    add({DType::Q4_0, DType::Q8_0, KILN_TO_FLOAT(BlockQ4_0, dequantize_row_q4_0),
         KILN_FROM_FLOAT(BlockQ4_0, quantize_row_q4_0_ref), nullptr,
         avx2 ? KILN_VEC_DOT(BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0_avx2)
              : KILN_VEC_DOT(BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0),
         KILN_VEC_DOT(BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0)});
    add({DType::Q4_1, DType::Q8_1, KILN_TO_FLOAT(BlockQ4_1, dequantize_row_q4_1),
         KILN_FROM_FLOAT(BlockQ4_1, quantize_row_q4_1_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ4_1, BlockQ8_1, vec_dot_q4_1_q8_1),
         KILN_VEC_DOT(BlockQ4_1, BlockQ8_1, vec_dot_q4_1_q8_1)});
    add({DType::Q5_0, DType::Q8_0, KILN_TO_FLOAT(BlockQ5_0, dequantize_row_q5_0),
         KILN_FROM_FLOAT(BlockQ5_0, quantize_row_q5_0_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ5_0, BlockQ8_0, vec_dot_q5_0_q8_0),
         KILN_VEC_DOT(BlockQ5_0, BlockQ8_0, vec_dot_q5_0_q8_0)});
    add({DType::Q5_1, DType::Q8_1, KILN_TO_FLOAT(BlockQ5_1, dequantize_row_q5_1),
         KILN_FROM_FLOAT(BlockQ5_1, quantize_row_q5_1_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ5_1, BlockQ8_1, vec_dot_q5_1_q8_1),
         KILN_VEC_DOT(BlockQ5_1, BlockQ8_1, vec_dot_q5_1_q8_1)});
    add({DType::IQ4_NL, DType::Q8_0, KILN_TO_FLOAT(BlockIQ4NL, dequantize_row_iq4_nl),
         KILN_FROM_FLOAT(BlockIQ4NL, quantize_row_iq4_nl_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0),
         KILN_VEC_DOT(BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0)});
    // IQ4_XS: ggml's vec_dot order, which its one-token products take. For batches of 8 or more
    // rows on AVX2 CPUs ggml switches to its IQ panel gemm (ggml-cpu/iqp.cpp), whose order the
    // iq4_xs matrix family (ops/gemm/gemm.h) gives those rows.
    add({DType::IQ4_XS, DType::Q8_K, KILN_TO_FLOAT(BlockIQ4XS, dequantize_row_iq4_xs),
         KILN_FROM_FLOAT(BlockIQ4XS, quantize_row_iq4_xs_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockIQ4XS, BlockQ8_K, vec_dot_iq4_xs_q8_K),
         KILN_VEC_DOT(BlockIQ4XS, BlockQ8_K, vec_dot_iq4_xs_q8_K)});
    add({DType::Q2_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ2_K, dequantize_row_q2_K),
         KILN_FROM_FLOAT(BlockQ2_K, quantize_row_q2_K_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ2_K, BlockQ8_K, vec_dot_q2_K_q8_K),
         KILN_VEC_DOT(BlockQ2_K, BlockQ8_K, vec_dot_q2_K_q8_K)});
    add({DType::Q3_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ3_K, dequantize_row_q3_K),
         KILN_FROM_FLOAT(BlockQ3_K, quantize_row_q3_K_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ3_K, BlockQ8_K, vec_dot_q3_K_q8_K),
         KILN_VEC_DOT(BlockQ3_K, BlockQ8_K, vec_dot_q3_K_q8_K)});
    add({DType::Q4_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ4_K, dequantize_row_q4_K),
         KILN_FROM_FLOAT(BlockQ4_K, quantize_row_q4_K_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K),
         KILN_VEC_DOT(BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K)});
    add({DType::Q5_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ5_K, dequantize_row_q5_K),
         KILN_FROM_FLOAT(BlockQ5_K, quantize_row_q5_K_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ5_K, BlockQ8_K, vec_dot_q5_K_q8_K),
         KILN_VEC_DOT(BlockQ5_K, BlockQ8_K, vec_dot_q5_K_q8_K)});
    add({DType::Q6_K, DType::Q8_K, KILN_TO_FLOAT(BlockQ6_K, dequantize_row_q6_K),
         KILN_FROM_FLOAT(BlockQ6_K, quantize_row_q6_K_ref), nullptr,
         KILN_VEC_DOT_LEVELS(BlockQ6_K, BlockQ8_K, vec_dot_q6_K_q8_K),
         KILN_VEC_DOT(BlockQ6_K, BlockQ8_K, vec_dot_q6_K_q8_K)});
#undef KILN_TO_FLOAT
#undef KILN_FROM_FLOAT
#undef KILN_VEC_DOT
#undef KILN_VEC_DOT_LEVELS
    // ggml's x86 repack (ref: ggml-cpu/repack.cpp ggml_repack_get_optimal_repack_type) applies to
    // Q4_0, IQ4_NL and Q4_K on AVX2 CPUs (and Q2_K with AVX-512, not emulated here).
    if (avx2) {
      auto rows8 = [&](DType t, VecDotFn fast, VecDotFn ref, VecDotFn fast_x4, VecDotFn ref_x4) {
        QuantTraits& e = entries[static_cast<uint32_t>(t)];
        e.vec_dot_rows8 = fast;
        e.vec_dot_rows8_ref = ref;
        e.vec_dot_rows8_x4 = fast_x4;
        e.vec_dot_rows8_x4_ref = ref_x4;
      };
      const VecDotFn q4_0 = &vec_dot_fn<BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0_rows8_avx2>;
      const VecDotFn q4_0_ref = &vec_dot_fn<BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0_rows8>;
      rows8(DType::Q4_0, q4_0, q4_0_ref, q4_0, q4_0_ref);
      entries[static_cast<uint32_t>(DType::Q4_0)].vec_dot_rows8_x4_8x4 =
          cpu_has_avx512_vnni() ? &vec_dot_tile_fn<BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0_rows8_8x4_avx512>
                                : &vec_dot_tile_fn<BlockQ4_0, BlockQ8_0, vec_dot_q4_0_q8_0_rows8_8x4_avx2>;
      const VecDotFn iq4 = cpu_has_avx512_vnni()
                               ? &vec_dot_fn<BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_rows8_avx512>
                               : &vec_dot_fn<BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_rows8_avx2>;
      const VecDotFn iq4_ref = &vec_dot_fn<BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_rows8>;
      rows8(DType::IQ4_NL, iq4, iq4_ref, iq4, iq4_ref);
      entries[static_cast<uint32_t>(DType::IQ4_NL)].vec_dot_rows8_x4_8x4 =
          cpu_has_avx512_vnni()
              ? &vec_dot_tile_fn<BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_rows8_8x4_avx512>
              : &vec_dot_tile_fn<BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_rows8_8x4_avx2>;
      rows8(DType::Q4_K, &vec_dot_fn<BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K_rows8_avx2>,
            &vec_dot_fn<BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K_rows8>,
            &vec_dot_fn<BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K_rows8_x4_avx2>,
            &vec_dot_fn<BlockQ4_K, BlockQ8_K, vec_dot_q4_K_q8_K_rows8_x4>);
    }
    // act_from_float: the activation quantizer is the from_float of the vec_dot type.
    for (uint32_t id = 0; id < kDTypeIdLimit; ++id) {
      if (!present[id]) continue;
      const auto act = static_cast<uint32_t>(entries[id].vec_dot_type);
      KILN_ASSERT(present[act], "quant traits: vec_dot_type without traits");
      entries[id].act_from_float = entries[act].from_float;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const QuantTraits* quant_traits(DType t) {
  const auto id = static_cast<uint32_t>(t);
  if (id >= kDTypeIdLimit || !table().present[id]) return nullptr;
  return &table().entries[id];
}

bool quantize_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

size_t quantize_chunk(DType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                      const float* imatrix) {
  KILN_ASSERT(quantize_supported(t), "quantize_chunk: unsupported type");
  KILN_ASSERT(nrows >= 0 && n_per_row >= 0 && n_per_row % block_size(t) == 0,
              "quantize_chunk: n_per_row not a multiple of the block size");
  const int64_t n = nrows * n_per_row;
  switch (t) {
    case DType::F32:
      f32_from_float(src, dst, n);
      break;
    case DType::F16:
      f32_to_f16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::BF16:
      f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::Q4_0:
      return quantize_q4_0(src, dst, nrows, n_per_row, imatrix);
    case DType::Q4_1:
      return quantize_q4_1(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_0:
      return quantize_q5_0(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_1:
      return quantize_q5_1(src, dst, nrows, n_per_row, imatrix);
    case DType::Q8_0:
      return quantize_q8_0(src, dst, nrows, n_per_row, imatrix);
    case DType::Q2_K:
      return quantize_q2_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q3_K:
      return quantize_q3_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q4_K:
      return quantize_q4_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_K:
      return quantize_q5_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q6_K:
      return quantize_q6_K(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ4_NL:
      return quantize_iq4_nl(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ4_XS:
      return quantize_iq4_xs(src, dst, nrows, n_per_row, imatrix);
    default:
      break;
  }
  return static_cast<size_t>(nrows) * row_size(t, n_per_row);
}

}  // namespace kiln
