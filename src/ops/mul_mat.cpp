// MulMat: dst[i, j, A, B] = dot(src0[:, i, A / rA, B / rB], src1[:, j, A, B]) -- weights (any
// quant_traits type with a vec_dot) times F32 activations, F32 out. src0 broadcasts over dims 2
// and 3 (rA = src1.ne[2] / src0.ne[2], as ggml_mul_mat).
//
// ref: ggml_compute_forward_mul_mat (ggml-cpu/ggml-cpu.c), without the llamafile sgemm path; weights
// that ggml repacks (quant.h vec_dot_rows8) use that kernel's float order.
// Phase 0 converts every src1 row to the weights' vec_dot_type with act_from_float (Q8_0 / Q8_1 /
// Q8_K blocks, F16, BF16 or F32) into scratch, one unit per src1 row. Phase 1 computes dot products
// with vec_dot (4 activation rows per call where the type has vec_dot_x4, a tile of 8 weight rows
// x 4 activation rows where it has vec_dot_rows8_x4_8x4), one unit
// per tile of kTileRows weight rows x kTileCols activation rows (all rows of a small batch) of one
// (A, B) plane; units are numbered rows-fastest so a range of units reuses the same activations.
// params.single_row_order: every activation row in the float order of a batch of one row.
// Requirements: src0 rows whole blocks (nb[0] = block bytes), src1 rows contiguous (nb[0] = 4);
// other strides are free.
#include <algorithm>
#include <cstdint>

#include "ops/kernel.h"
#include "ops/quant/quant.h"

namespace kiln::ops {
namespace {

constexpr int64_t kTileRows = 16;  // weight rows per phase-1 unit
constexpr int64_t kTileCols = 16;  // activation rows per phase-1 unit, for batches over kSmallBatch
// Batches of up to this many activation rows (batched decode, speculative verification) are one
// column of units: each unit then holds every row, so threads, which take contiguous ranges of
// units, get equal work whatever the row count (17 rows in units of 16 + 1 gave one thread all
// the 16-row work), and each weight tile is read once.
constexpr int64_t kSmallBatch = 64;

int64_t tile_cols(const TensorView& dst) {
  return dst.ne[1] <= kSmallBatch ? std::max<int64_t>(dst.ne[1], 1) : kTileCols;
}

Status check_mul_mat(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  const TensorView& w = call.src[0];
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  const QuantTraits* t = quant_traits(w.type);
  if (t == nullptr || t->vec_dot == nullptr || t->act_from_float == nullptr) {
    return make_error("[mul_mat] no dot product for weights ", describe(w));
  }
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

// Bytes between converted activation rows in scratch (a multiple of kScratchAlign).
size_t act_stride(const OpCall& call) {
  const size_t bytes = row_size(quant_traits(call.src[0].type)->vec_dot_type, call.src[1].ne[0]);
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

KernelPlan plan_mul_mat(const OpCall& call) {
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  KernelPlan p;
  p.n_phases = 2;
  p.units[0] = a.nrows();
  p.units[1] = ceil_div(d.ne[0], kTileRows) * ceil_div(d.ne[1], tile_cols(d)) * d.ne[2] * d.ne[3];
  p.scratch_bytes = static_cast<size_t>(a.nrows()) * act_stride(call);
  return p;
}

void run_mul_mat(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch) {
  const TensorView& w = call.src[0];
  const TensorView& a = call.src[1];
  const TensorView& d = call.dst;
  const QuantTraits* t = quant_traits(w.type);
  const size_t stride = act_stride(call);
  char* acts = static_cast<char*>(scratch);
  const int64_t k = w.ne[0];
  if (phase == 0) {
    for (int64_t r = begin; r < end; ++r) {
      t->act_from_float(reinterpret_cast<const float*>(row_ptr(a, row_idx(a, r))), acts + r * stride, k);
    }
    return;
  }
  KILN_ASSERT(phase == 1, "mul_mat has two phases");
  const int64_t n_tr = ceil_div(d.ne[0], kTileRows);
  const int64_t cols = tile_cols(d);
  const int64_t n_tc = ceil_div(d.ne[1], cols);
  const int64_t r2 = a.ne[2] / w.ne[2];
  const int64_t r3 = a.ne[3] / w.ne[3];
  // ggml multiplies 2-D weights with a multiple of 8 rows of some types with its repacked kernels,
  // whose float order differs from vec_dot's (quant.h vec_dot_rows8).
  // Of n activation rows, ggml sends the first n - n % 4 through its 4-row gemm kernels; with
  // single_row_order, only where their order is the one-row kernel's (the same function).
  const bool rows8 = t->vec_dot_rows8 != nullptr && w.ne[1] % 8 == 0 && w.ne[2] == 1 && w.ne[3] == 1;
  const bool gemm_keeps_order = t->vec_dot_rows8_x4 == t->vec_dot_rows8;
  const int64_t gemm_rows = call.params.single_row_order && !gemm_keeps_order ? 0 : a.ne[1] - a.ne[1] % 4;
  for (int64_t u = begin; u < end; ++u) {
    const int64_t tr = u % n_tr;
    const int64_t tc = (u / n_tr) % n_tc;
    const int64_t plane = u / (n_tr * n_tc);
    const int64_t i2 = plane % d.ne[2];
    const int64_t i3 = plane / d.ne[2];
    const int64_t row0 = tr * kTileRows, row1 = std::min(row0 + kTileRows, d.ne[0]);
    const int64_t col0 = tc * cols, col1 = std::min(col0 + cols, d.ne[1]);
    int64_t j = col0;
    // Tiles of 8 weight rows x 4 activation rows where a kernel computes them at once (the tile's
    // rows are whole groups of 8: row0 is a multiple of 16 and rows8 weights have 8k rows).
    if (rows8 && t->vec_dot_rows8_x4_8x4 != nullptr && d.nb[0] == sizeof(float)) {
      for (; j + 4 <= std::min(col1, gemm_rows); j += 4) {
        const char* act = acts + ((i3 * a.ne[2] + i2) * a.ne[1] + j) * static_cast<int64_t>(stride);
        char* drow = row_ptr(d, j, i2, i3);
        for (int64_t i = row0; i < row1; i += 8) {
          t->vec_dot_rows8_x4_8x4(k, &elem<float>(d, drow, i), d.nb[1], row_ptr(w, i, 0, 0), w.nb[1], act, stride);
        }
      }
    }
    if (!rows8 && t->vec_dot_x4 != nullptr) {
      for (; j + 4 <= col1; j += 4) {
        const char* act = acts + ((i3 * a.ne[2] + i2) * a.ne[1] + j) * static_cast<int64_t>(stride);
        char* drow = row_ptr(d, j, i2, i3);
        for (int64_t i = row0; i < row1; ++i) {
          t->vec_dot_x4(k, &elem<float>(d, drow, i), d.nb[1], row_ptr(w, i, i2 / r2, i3 / r3), act, stride);
        }
      }
    }
    for (; j < col1; ++j) {
      const VecDotFn dot = !rows8 ? t->vec_dot : j < gemm_rows ? t->vec_dot_rows8_x4 : t->vec_dot_rows8;
      // src1 row (j, i2, i3) was converted at its flat row index.
      const char* act = acts + ((i3 * a.ne[2] + i2) * a.ne[1] + j) * static_cast<int64_t>(stride);
      char* drow = row_ptr(d, j, i2, i3);
      for (int64_t i = row0; i < row1; ++i) {
        dot(k, &elem<float>(d, drow, i), row_ptr(w, i, i2 / r2, i3 / r3), act);
      }
    }
  }
}

}  // namespace

const KernelFns kMulMatKernel{check_mul_mat, plan_mul_mat, run_mul_mat};

}  // namespace kiln::ops
