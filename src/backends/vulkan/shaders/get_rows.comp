#version 450
// GetRows: dst F32 [n, m, a, b], row (i, a, b) = src0 row src1[i, a, b] (src0 [n, r, a, b] of type
// WTYPE, src1 I32). One invocation per 32-value unit of a dst row. A row id outside [0, r) writes a
// row of NaN (ops/op.h: bad data never reads out of bounds).
#include "common.glsl"
#include "dequant.glsl"

layout(local_size_x = 64) in;

void main() {
  TensorDesc d = pc.p.t[0], s = pc.p.t[1], ids = pc.p.t[2];
  uint k = d.ne[0], units = (k + 31) / 32;
  uint g = wg_index() * 64 + gl_LocalInvocationID.x;
  uint u = g % units, r = g / units;
  if (r >= d.ne[1] * d.ne[2] * d.ne[3]) return;
  uint i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
  int id = I32s(ids.addr + elem_offset(ids, i1, i2, i3, 0)).v[0];
  float v[32];
  if (id < 0 || uint(id) >= s.ne[1]) {
    for (uint j = 0; j < 32; ++j) v[j] = uintBitsToFloat(0x7fc00000u);
  } else {
    DEQ32(row_addr(s, uint(id), i2, i3), u, k, v);
  }
  uint64_t out_row = row_addr(d, i1, i2, i3);
  for (uint j = 0; j < 32 && 32 * u + j < k; ++j) F32s(out_row + uint64_t(32 * u + j) * d.nb[0]).v[0] = v[j];
}
