#version 450
// SetRows: dst[:, ids[i, a, b], a, b] = src0[:, i, a, b] (F32) converted to dst's type; other rows
// keep their bytes; an id outside [0, dst.ne[1]) writes nothing. One invocation per 32 values of a
// src0 row. With ROW_IS_ID the op is Cpy into a quantized type: row i goes to row i (no ids). QTYPE picks the destination at compile time: float (F32, F16, BF16 by dst.type at run
// time), q8_0 or q4_0 (quantized as ggml's quantize_row_*_ref: one block per invocation).
#include "common.glsl"

layout(local_size_x = 64) in;

void main() {
  TensorDesc d = pc.p.t[0], s = pc.p.t[1], ids = pc.p.t[2];
  uint k = s.ne[0], units = (k + 31) / 32;
  uint g = wg_index() * 64 + gl_LocalInvocationID.x;
  uint u = g % units, r = g / units;
  if (r >= s.ne[1] * s.ne[2] * s.ne[3]) return;
  uint i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
#ifdef ROW_IS_ID
  int id = int(i1);
#else
  int id = I32s(ids.addr + elem_offset(ids, i1, i2, i3, 0)).v[0];
#endif
  if (id < 0 || uint(id) >= d.ne[1]) return;
  uint64_t src = row_addr(s, i1, i2, i3), dst = row_addr(d, uint(id), i2, i3);
  float v[32];
  for (uint j = 0; j < 32; ++j) v[j] = 32 * u + j < k ? F32s(src + 4 * uint64_t(32 * u + j)).v[0] : 0.0;
#if defined(QTYPE_Q8_0)
  float amax = 0.0;
  for (uint j = 0; j < 32; ++j) amax = max(amax, abs(v[j]));
  float dd = amax / 127.0, id_ = dd != 0.0 ? 1.0 / dd : 0.0;
  uint64_t b = dst + 34 * uint64_t(u);
  F16s(b).v[0] = float16_t(dd);
  for (uint j = 0; j < 32; ++j) {
    float x = v[j] * id_;
    I8s(b + 2 + j).v[0] = int8_t(int(sign(x) * floor(abs(x) + 0.5)));  // roundf: halves away from 0
  }
#elif defined(QTYPE_Q4_0)
  float amax = 0.0, mx = 0.0;
  for (uint j = 0; j < 32; ++j) {
    if (amax < abs(v[j])) { amax = abs(v[j]); mx = v[j]; }
  }
  float dd = mx / -8.0, id_ = dd != 0.0 ? 1.0 / dd : 0.0;
  uint64_t b = dst + 18 * uint64_t(u);
  F16s(b).v[0] = float16_t(dd);
  for (uint j = 0; j < 16; ++j) {
    uint q0 = min(15u, uint(int(v[j] * id_ + 8.5)));
    uint q1 = min(15u, uint(int(v[j + 16] * id_ + 8.5)));
    U8s(b + 2 + j).v[0] = uint8_t(q0 | (q1 << 4));
  }
#else
  uint esize = d.type == DT_F32 ? 4u : 2u;
  for (uint j = 0; j < 32 && 32 * u + j < k; ++j) store_float(d.type, dst + uint64_t(esize) * (32 * u + j), v[j]);
#endif
}
