// MulMat: dst[i, j, A, B] = dot(src0[:, i, A / rA, B / rB], src1[:, j, A, B]) -- weights (any
// quant_traits type with a vec_dot, plain or in a prepared layout) times F32 activations, F32 out.
// src0 broadcasts over dims 2 and 3 (rA = src1.ne[2] / src0.ne[2], as ggml_mul_mat).
//
// ref: ggml_compute_forward_mul_mat (ggml-cpu/ggml-cpu.c). The arithmetic is the weight family's
// (ops/gemm/gemm.h); of n activation rows, ggml sends the first Family::gemm_act_rows through its
// prompt kernels, whose order differs for some types (Q4_K, F16), unless params.single_row_order
// asks for the one-row order of every row (speculative verification).
// Phase 0 converts every src1 row into the family's activation format in scratch, one unit per
// row. Phase 1 computes tiles of kTileRows weight rows x one band of activation rows of one (A, B)
// plane per unit; units are numbered weight tiles fastest, so a range of units reuses one band of
// activations while the weights stream through. A unit reads its band once per group of weight rows
// and keeps its weight tile in L2 for the band's activation rows, so the band is as wide as a tile
// allows (kMaxBandRows) unless its rows are large: the weights stream from memory once per band (for
// F16's six bytes per value, bands sized for L2 took 4 rows of a 5632-wide product and halved the
// kernel's rate: docs/performance.md, "F16 prompts"); a band stays within the last-level cache.
// Requirements: src0 rows whole blocks (nb[0] = block bytes), src1 rows contiguous (nb[0] = 4);
// other strides are free. Prepared weights are 2-D with a multiple of their family's row_group rows.
#include <algorithm>
#include <cstdint>

#include "ops/gemm/gemm.h"
#include "ops/kernel.h"

namespace kiln::ops {
namespace {

constexpr int64_t kTileRows = 16;       // weight rows per phase-1 unit (a multiple of 8)
constexpr size_t kBandBytes = 4 << 20;  // converted activation rows per unit, at most
constexpr int64_t kMaxBandRows = 64;

Status check_mul_mat(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  const TensorView& w = call.src[0];
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  if (!gemm::supported(w)) return make_error("[mul_mat] no dot product for weights ", describe(w));
  KILN_TRY(check_type(call, a, DType::F32, "src1"));
  KILN_TRY(check_type(call, d, DType::F32, "dst"));
  if (a.ne[0] != w.ne[0] || d.ne[0] != w.ne[1] || d.ne[1] != a.ne[1] || d.ne[2] != a.ne[2] ||
      d.ne[3] != a.ne[3] || a.ne[2] % w.ne[2] != 0 || a.ne[3] % w.ne[3] != 0) {
    return make_error("[mul_mat] weights ", describe(w), " x src1 ", describe(a), " -> dst ", describe(d),
                      " do not fit");
  }
  if (w.nb[0] != type_size(w.type))
    return make_error("[mul_mat] weight rows of ", describe(w), " are not contiguous");
  if (a.nb[0] != sizeof(float))
    return make_error("[mul_mat] src1 rows of ", describe(a), " are not contiguous");
  return ok_status();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes between converted activation rows in scratch (a multiple of kScratchAlign).
size_t act_stride(const OpCall& call) {
  const size_t bytes = gemm::act_row_bytes(gemm::family_for(call.src[0]), call.src[1].ne[0]);
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// Activation rows per unit: a multiple of 4 (the kernels' tile) filling about kBandBytes.
int64_t band_rows(const OpCall& call) {
  const int64_t fit = static_cast<int64_t>(kBandBytes / act_stride(call));
  return std::clamp<int64_t>(fit / 4 * 4, 4, kMaxBandRows);
}

KernelPlan plan_mul_mat(const OpCall& call) {
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  KernelPlan p;
  p.n_phases = 2;
  p.units[0] = a.nrows();
  p.units[1] = ceil_div(d.ne[0], kTileRows) * ceil_div(d.ne[1], band_rows(call)) * d.ne[2] * d.ne[3];
  p.scratch_bytes = static_cast<size_t>(a.nrows()) * act_stride(call);
  return p;
}

void run_mul_mat(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch) {
  const TensorView& w = call.src[0];
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  const gemm::Family& fam = gemm::family_for(w);
  const size_t stride = act_stride(call);
  char* acts = static_cast<char*>(scratch);
  const int64_t k = w.ne[0];
  if (phase == 0) {
    for (int64_t r = begin; r < end; ++r)
      fam.convert_act(reinterpret_cast<const float*>(row_ptr(a, row_idx(a, r))), acts + r * stride, k);
    return;
  }
  KILN_ASSERT(phase == 1, "mul_mat has two phases");
  const int64_t band = band_rows(call);
  const int64_t n_tr = ceil_div(d.ne[0], kTileRows);
  const int64_t n_tc = ceil_div(d.ne[1], band);
  const int64_t r2 = a.ne[2] / w.ne[2];
  const int64_t r3 = a.ne[3] / w.ne[3];
  // Prepared weights are addressed by row group (gemm/layouts.h): groups of the family's row_group
  // rows (kTileRows is a multiple of it).
  const int64_t gemm_rows = call.params.single_row_order ? 0 : fam.gemm_act_rows(w, a.ne[1]);
  const bool prepared = w.layout != TensorLayout::Plain;
  const size_t group_bytes =
      prepared ? gemm::prepared_bytes(w, w.layout) / static_cast<size_t>(w.ne[1] / fam.row_group) : 0;
  for (int64_t u = begin; u < end; ++u) {
    const int64_t tr = u % n_tr;
    const int64_t tc = (u / n_tr) % n_tc;
    const int64_t plane = u / (n_tr * n_tc);
    const int64_t i2 = plane % d.ne[2];
    const int64_t i3 = plane / d.ne[2];
    const int64_t row0 = tr * kTileRows, col0 = tc * band;
    gemm::Tile t;
    t.type = w.type;
    t.k = k;
    t.n_rows = std::min(kTileRows, d.ne[0] - row0);
    if (prepared) {
      t.w = static_cast<const char*>(w.data) + static_cast<size_t>(row0 / fam.row_group) * group_bytes;
      t.w_stride = group_bytes;
    } else {
      t.w = row_ptr(w, row0, i2 / r2, i3 / r3);
      t.w_stride = w.nb[1];
    }
    // src1 row (j, i2, i3) was converted at its flat row index.
    t.act = acts + ((i3 * a.ne[2] + i2) * a.ne[1] + col0) * static_cast<int64_t>(stride);
    t.act_stride = stride;
    t.n_act = std::min(band, d.ne[1] - col0);
    t.n_gemm_act = std::clamp<int64_t>(gemm_rows - col0, 0, t.n_act);
    t.dst = reinterpret_cast<float*>(row_ptr(d, col0, i2, i3) + row0 * static_cast<int64_t>(d.nb[0]));
    t.dst_row_stride = d.nb[1];
    t.dst_col_stride = d.nb[0];
    fam.run(t);
  }
}

}  // namespace

const KernelFns kMulMatKernel{check_mul_mat, plan_mul_mat, run_mul_mat};

}  // namespace kiln::ops
