#version 450
// MulMat for prompts: dst [n, m, A, B] = src0 (weights [k, n, a, b], type WTYPE) x src1 (F32
// [k, m, A, B]) in tiles of 64 weight rows x 64 activation columns per workgroup of 256 threads.
// Per 32-value step of k, 64 threads dequantize one weight row's unit each and 64 round one
// column's unit each (act_round.glsl, as the CPU rounds activations) into shared memory; then each
// thread accumulates a 4 x 4 block of outputs. Each output sums its units in k order, one unit's
// 32 products at a time (mul_mat.comp's order differs: the backend uses this path only for batches
// of 32+ columns and never with OpParams::single_row_order).
#include "common.glsl"
#include "dequant.glsl"
#include "act_round.glsl"

#define TILE 64
layout(local_size_x = 256) in;
shared float w_sh[TILE][33];
shared float x_sh[TILE][33];

void main() {
  TensorDesc d = pc.p.t[0], w = pc.p.t[1], x = pc.p.t[2];
  uint n = d.ne[0], m = d.ne[1], k = w.ne[0];
  uint row_tiles = (n + TILE - 1) / TILE, col_tiles = (m + TILE - 1) / TILE;
  uint g = wg_index();
  uint rt = g % row_tiles, rest = g / row_tiles, ct = rest % col_tiles, batch = rest / col_tiles;
  if (batch >= d.ne[2] * d.ne[3]) return;
  uint i2 = batch % d.ne[2], i3 = batch / d.ne[2];
  uint tid = gl_LocalInvocationID.x;
  uint r0 = rt * TILE, c0 = ct * TILE;
  uint tr = (tid % 16) * 4, tc = (tid / 16) * 4;  // this thread's 4 x 4 block in the tile
  float acc[4][4];
  for (uint a = 0; a < 4; ++a)
    for (uint b = 0; b < 4; ++b) acc[a][b] = 0.0;
  uint units = (k + 31) / 32;
  for (uint u = 0; u < units; ++u) {
    if (tid < TILE) {
      uint row = r0 + tid;
      float v[32];
      if (row < n) {
        DEQ32(row_addr(w, row, i2 / (d.ne[2] / w.ne[2]), i3 / (d.ne[3] / w.ne[3])), u, k, v);
      } else {
        for (uint j = 0; j < 32; ++j) v[j] = 0.0;
      }
      for (uint j = 0; j < 32; ++j) w_sh[tid][j] = v[j];
    } else if (tid < 2 * TILE) {
      uint col = c0 + tid - TILE;
      float xs[32];
      if (col < m) {
        uint64_t xrow = row_addr(x, col, i2, i3), xa = xrow + uint64_t(32 * u) * x.nb[0];
        uint j_end = min(32u, k - 32 * u);
        for (uint j = 0; j < 32; ++j) xs[j] = j < j_end ? F32s(xa + uint64_t(j) * x.nb[0]).v[0] : 0.0;
        round_act32(xs, xrow, x.nb[0], u);
      } else {
        for (uint j = 0; j < 32; ++j) xs[j] = 0.0;
      }
      for (uint j = 0; j < 32; ++j) x_sh[tid - TILE][j] = xs[j];
    }
    barrier();
    for (uint a = 0; a < 4; ++a) {
      for (uint b = 0; b < 4; ++b) {
        float s = 0.0;
        for (uint j = 0; j < 32; ++j) s += w_sh[tr + a][j] * x_sh[tc + b][j];
        acc[a][b] += s;
      }
    }
    barrier();
  }
  for (uint a = 0; a < 4; ++a) {
    for (uint b = 0; b < 4; ++b) {
      uint row = r0 + tr + a, col = c0 + tc + b;
      if (row < n && col < m) F32s(d.addr + elem_offset(d, row, col, i2, i3)).v[0] = acc[a][b];
    }
  }
}
