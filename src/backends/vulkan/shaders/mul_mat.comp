#version 450
// MulMat: dst [n, m, A, B] = src0 (weights [k, n, a, b], type WTYPE) x src1 (F32 [k, m, A, B]).
// A workgroup computes 64 / T weight rows against a group of up to COLS activation columns, T
// threads per row (T = 2^i[0], a power of two near the row's count of 32-value units, at most 64,
// so that short rows do not leave threads idle): a row's units are dequantized once and multiplied
// with every column of the group, the row's threads take units in turn, and a shared-memory tree
// sums their partial sums. Activations are rounded first as the CPU rounds them (act_round.glsl:
// ACT_* names the weights' vec_dot type); products are summed in F32.
#include "common.glsl"
#include "dequant.glsl"
#include "act_round.glsl"

#define WG 64
#define COLS 8
layout(local_size_x = WG) in;
shared float partial[COLS][WG];

void main() {
  TensorDesc d = pc.p.t[0], w = pc.p.t[1], x = pc.p.t[2];
  uint n = d.ne[0], m = d.ne[1], k = w.ne[0];
  uint t = 1u << uint(pc.p.i[0]), rows_per_wg = WG / t;
  uint row_groups = (n + rows_per_wg - 1) / rows_per_wg, col_groups = (m + COLS - 1) / COLS;
  uint g = wg_index();
  uint rg = g % row_groups, rest = g / row_groups, cg = rest % col_groups, batch = rest / col_groups;
  if (batch >= d.ne[2] * d.ne[3]) return;
  uint i2 = batch % d.ne[2], i3 = batch / d.ne[2];
  uint tid = gl_LocalInvocationID.x, lane = tid % t;
  uint row = rg * rows_per_wg + tid / t;
  uint c0 = cg * COLS, ncols = min(COLS, m - c0);
  float acc[COLS];
  for (uint c = 0; c < COLS; ++c) acc[c] = 0.0;
  if (row < n) {
    uint64_t wrow = row_addr(w, row, i2 / (d.ne[2] / w.ne[2]), i3 / (d.ne[3] / w.ne[3]));
    uint units = (k + 31) / 32;
    for (uint u = lane; u < units; u += t) {
      float v[32];
      DEQ32(wrow, u, k, v);
      uint j_end = min(32u, k - 32 * u);
      for (uint c = 0; c < ncols; ++c) {
        uint64_t xrow = row_addr(x, c0 + c, i2, i3), xa = xrow + uint64_t(32 * u) * x.nb[0];
        float xs[32];
        for (uint j = 0; j < 32; ++j) xs[j] = j < j_end ? F32s(xa + uint64_t(j) * x.nb[0]).v[0] : 0.0;
        round_act32(xs, xrow, x.nb[0], u);
        float s = 0.0;
        for (uint j = 0; j < j_end; ++j) s += v[j] * xs[j];
        acc[c] += s;
      }
    }
  }
  for (uint c = 0; c < COLS; ++c) partial[c][tid] = acc[c];
  barrier();
  for (uint h = t / 2; h > 0; h /= 2) {
    if (lane < h) {
      for (uint c = 0; c < COLS; ++c) partial[c][tid] += partial[c][tid + h];
    }
    barrier();
  }
  if (lane == 0 && row < n) {
    for (uint c = 0; c < ncols; ++c) F32s(d.addr + elem_offset(d, row, c0 + c, i2, i3)).v[0] = partial[c][tid];
  }
}
