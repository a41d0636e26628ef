#version 450
// Rope: rotary embedding of F32 src0 [head_dim, n_head, n_tokens, b] by positions src1 (I32
// [n_tokens]), with optional frequency factors src2 (F32). One invocation per pair of dimensions.
// Angles as the CPU kernel (ops/rope.cpp) and ggml: theta starts at the position and is multiplied
// by theta_scale once per pair (the same float steps), YaRN mixes interpolated and extrapolated
// angles. Params: f = {freq_scale, ext_factor, attn_factor, corr_dims[0], corr_dims[1],
// theta_scale}; i = {n_dims, neox (0/1), has frequency factors (0/1)}.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
  TensorDesc d = pc.p.t[0], s = pc.p.t[1], pos = pc.p.t[2];
  uint half_ne0 = d.ne[0] / 2;
  uint n = wg_index() * 256 + gl_LocalInvocationID.x;
  if (n >= half_ne0 * d.ne[1] * d.ne[2] * d.ne[3]) return;
  uint pi = n % half_ne0, r = n / half_ne0;
  uint i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
  uint n_dims = uint(pc.p.i[0]);
  bool neox = pc.p.i[1] != 0;
  uint64_t src = row_addr(s, i1, i2, i3), dst = row_addr(d, i1, i2, i3);
  uint i0 = 2 * pi;
  if (i0 >= n_dims) {
    for (uint j = i0; j < i0 + 2; ++j) F32s(dst + uint64_t(j) * d.nb[0]).v[0] = F32s(src + uint64_t(j) * s.nb[0]).v[0];
    return;
  }
  float freq_scale = pc.p.f[0], ext_factor = pc.p.f[1], mscale = pc.p.f[2];
  float theta = float(I32s(pos.addr + uint64_t(i2) * pos.nb[0]).v[0]);
  for (uint j = 0; j < pi; ++j) theta *= pc.p.f[5];
  float ff = 1.0;
  if (pc.p.i[2] != 0) {
    TensorDesc f = pc.p.t[3];
    ff = F32s(f.addr + uint64_t(pi) * f.nb[0]).v[0];
  }
  float theta_extrap = theta / ff;
  float th = freq_scale * theta_extrap;
  if (ext_factor != 0.0) {
    float y = (float(pi) - pc.p.f[3]) / max(0.001, pc.p.f[4] - pc.p.f[3]);
    float ramp_mix = (1.0 - min(1.0, max(0.0, y))) * ext_factor;
    th = th * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
    mscale *= 1.0 + 0.1 * log(1.0 / freq_scale);
  }
  float c = cos(th) * mscale, sn = sin(th) * mscale;
  uint ic = neox ? pi : i0, off = neox ? n_dims / 2 : 1;
  float x0 = F32s(src + uint64_t(ic) * s.nb[0]).v[0];
  float x1 = F32s(src + uint64_t(ic + off) * s.nb[0]).v[0];
  F32s(dst + uint64_t(ic) * d.nb[0]).v[0] = x0 * c - x1 * sn;
  F32s(dst + uint64_t(ic + off) * d.nb[0]).v[0] = x0 * sn + x1 * c;
}
