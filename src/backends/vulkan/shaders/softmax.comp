#version 450
// SoftMax of F32 rows: softmax(x * scale + slope * mask), one workgroup per row. The mask (src1, F32
// or F16, optional) broadcasts as ggml's: mask row i1, plane i2 % ne[2], i3 % ne[3]. ALiBi slopes
// as ggml (ops/softmax_row.h), from m0, m1 and n_head_log2 the backend computes.
// Params: f = {scale, m0, m1}; i = {n_head_log2, alibi (0/1), has mask (0/1)}.
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
shared float red[WG];

float reduce(float v, bool is_max) {
  uint tid = gl_LocalInvocationID.x;
  red[tid] = v;
  barrier();
  for (uint h = WG / 2; h > 0; h /= 2) {
    if (tid < h) red[tid] = is_max ? max(red[tid], red[tid + h]) : red[tid] + red[tid + h];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  TensorDesc d = pc.p.t[0], a = pc.p.t[1], m = pc.p.t[2];
  uint r = wg_index();
  if (r >= d.ne[1] * d.ne[2] * d.ne[3]) return;
  uint i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
  uint n = d.ne[0], tid = gl_LocalInvocationID.x;
  uint64_t src = row_addr(a, i1, i2, i3), dst = row_addr(d, i1, i2, i3);
  bool has_mask = pc.p.i[2] != 0;
  uint64_t mrow = has_mask ? row_addr(m, i1, i2 % m.ne[2], i3 % m.ne[3]) : 0ul;
  float slope = 1.0;
  if (pc.p.i[1] != 0) {
    uint nl2 = uint(pc.p.i[0]);
    slope = i2 < nl2 ? pow(pc.p.f[1], float(i2 + 1)) : pow(pc.p.f[2], float(2 * (i2 - nl2) + 1));
  }
  float scale = pc.p.f[0];
  float mx = -1.0 / 0.0;
  for (uint j = tid; j < n; j += WG) {
    float w = F32s(src + uint64_t(j) * a.nb[0]).v[0] * scale;
    if (has_mask) w += slope * load_float(m.type, mrow + uint64_t(j) * m.nb[0]);
    F32s(dst + uint64_t(j) * d.nb[0]).v[0] = w;
    mx = max(mx, w);
  }
  mx = reduce(mx, true);
  if (mx == -1.0 / 0.0) {  // every logit masked: zeros, as the CPU's softmax (ggml would give NaN)
    for (uint j = tid; j < n; j += WG) F32s(dst + uint64_t(j) * d.nb[0]).v[0] = 0.0;
    return;
  }
  float sum = 0.0;
  for (uint j = tid; j < n; j += WG) {
    float e = exp(F32s(dst + uint64_t(j) * d.nb[0]).v[0] - mx);
    F32s(dst + uint64_t(j) * d.nb[0]).v[0] = e;
    sum += e;
  }
  float inv = 1.0 / reduce(sum, false);
  for (uint j = tid; j < n; j += WG) F32s(dst + uint64_t(j) * d.nb[0]).v[0] *= inv;
}
