#version 450
// Per-row normalization of F32 rows (ne[0] values), one workgroup per row. OP_RMS: x / sqrt(mean(x^2)
// + eps); OP_RMS_MUL: the same times src1 (repeated as Mul's), rounded after each step as the CPU's
// RmsNorm then Mul; OP_LAYER: (x - mean) / sqrt(var + eps). eps: f[0].
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
shared float red[WG];

float sum_all(float v) {
  uint tid = gl_LocalInvocationID.x;
  red[tid] = v;
  barrier();
  for (uint h = WG / 2; h > 0; h /= 2) {
    if (tid < h) red[tid] += red[tid + h];
    barrier();
  }
  float s = red[0];
  barrier();
  return s;
}

void main() {
  TensorDesc d = pc.p.t[0], a = pc.p.t[1];
  uint r = wg_index();
  if (r >= d.ne[1] * d.ne[2] * d.ne[3]) return;
  uint i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
  uint n = d.ne[0], tid = gl_LocalInvocationID.x;
  uint64_t src = row_addr(a, i1, i2, i3), dst = row_addr(d, i1, i2, i3);
  float eps = pc.p.f[0];
  float mean = 0.0;
#ifdef OP_LAYER
  float s = 0.0;
  for (uint j = tid; j < n; j += WG) s += F32s(src + uint64_t(j) * a.nb[0]).v[0];
  mean = sum_all(s) / float(n);
#endif
  float s2 = 0.0;
  for (uint j = tid; j < n; j += WG) {
    float v = F32s(src + uint64_t(j) * a.nb[0]).v[0] - mean;
    s2 += v * v;
  }
  float scale = 1.0 / sqrt(sum_all(s2) / float(n) + eps);
  for (uint j = tid; j < n; j += WG) {
    float y = (F32s(src + uint64_t(j) * a.nb[0]).v[0] - mean) * scale;
#ifdef OP_RMS_MUL
    TensorDesc b = pc.p.t[2];
    y *= F32s(b.addr + elem_offset(b, j % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3])).v[0];
#endif
    F32s(dst + uint64_t(j) * d.nb[0]).v[0] = y;
  }
}
