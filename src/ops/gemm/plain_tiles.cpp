// The scalar kernels of the plain legacy families (layouts.h: Q8_0, Q4_1, Q5_0, Q5_1): the
// oracles of the AVX2 kernels (bit-identical: the same lane sums, FMAs, min terms and reduction,
// one output at a time).
#include <cmath>

#include "core/half.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

// Element j (0..31) of a block's nibbles: low nibbles are elements 0..15, high nibbles 16..31.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
// Bit j of a block's little-endian qh.
int high_bit(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Each type: its blocks, its activations and their scale, element j's level, and (types with a
// min) the min term m_w * s_a of a block.
struct Q8_0 {
  using Block = quant::BlockQ8_0;
  using Act = ActQ8_0;
  static constexpr bool kMin = false;
  static int level(const Block& b, int j) { return b.qs[j]; }
  static float act_d(const Act& a) { return a.d; }
};
struct Q5_0 {
  using Block = quant::BlockQ5_0;
  using Act = quant::BlockQ8_0;
  static constexpr bool kMin = false;
  static int level(const Block& b, int j) { return (nibble(b.qs, j) | high_bit(b.qh, j) << 4) - 16; }
  static float act_d(const Act& a) { return f16_to_f32(a.d); }
};
struct Q4_1 {
  using Block = quant::BlockQ4_1;
  using Act = quant::BlockQ8_1;
  static constexpr bool kMin = true;
  static int level(const Block& b, int j) { return nibble(b.qs, j); }
  static float act_d(const Act& a) { return f16_to_f32(a.d); }
};
struct Q5_1 {
  using Block = quant::BlockQ5_1;
  using Act = quant::BlockQ8_1;
  static constexpr bool kMin = true;
  static int level(const Block& b, int j) { return nibble(b.qs, j) | high_bit(b.qh, j) << 4; }
  static float act_d(const Act& a) { return f16_to_f32(a.d); }
};

template <class T>
float dot(int64_t k, const typename T::Block* w, const typename T::Act* a) {
  float lanes[8] = {}, mins = 0;
  for (int64_t b = 0; b < k / 32; ++b) {
    if constexpr (T::kMin) mins += f16_to_f32(w[b].m) * f16_to_f32(a[b].s);
    const float d = f16_to_f32(w[b].d) * T::act_d(a[b]);
    for (int l = 0; l < 8; ++l) {
      int sum = 0;
      for (int e = 4 * l; e < 4 * l + 4; ++e) sum += T::level(w[b], e) * a[b].qs[e];
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
  }
  if constexpr (T::kMin) return reduce_lanes8(lanes) + mins;
  return reduce_lanes8(lanes);
}

template <class T>
void each_output(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const typename T::Act*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i)
      *out_ptr(t, r, i) = dot<T>(
          t.k, reinterpret_cast<const typename T::Block*>(t.w + static_cast<size_t>(i) * t.w_stride), a);
  }
}

}  // namespace

void gemm_q8_0(const Tile& t) { each_output<Q8_0>(t); }
void gemm_q5_0(const Tile& t) { each_output<Q5_0>(t); }
void gemm_q4_1(const Tile& t) { each_output<Q4_1>(t); }
void gemm_q5_1(const Tile& t) { each_output<Q5_1>(t); }

}  // namespace kiln::gemm
