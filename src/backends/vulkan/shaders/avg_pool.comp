#version 450
// AvgPool2d: dst [c, w / k, h / k, b] = the mean of each k x k window (stride k, no padding) of src0
// [c, w, h, b] (F32), k = i[0]; per channel a float sum, window rows outer and columns inner, then
// divided by k * k, as the CPU kernel (ops/pool.cpp). One invocation per dst element.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
  TensorDesc d = pc.p.t[0], s = pc.p.t[1];
  uint n = wg_index() * 256 + gl_LocalInvocationID.x;
  if (n >= nelements(d)) return;
  uvec4 o = unravel(n, d.ne);
  uint k = uint(pc.p.i[0]);
  float sum = 0.0;
  for (uint ky = 0; ky < k; ++ky) {
    for (uint kx = 0; kx < k; ++kx)
      sum += F32s(s.addr + elem_offset(s, o.x, o.y * k + kx, o.z * k + ky, o.w)).v[0];
  }
  F32s(d.addr + elem_offset(d, o.x, o.y, o.z, o.w)).v[0] = sum / float(k * k);
}
