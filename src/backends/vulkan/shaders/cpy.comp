#version 450
// Cpy between float types (F32, F16, BF16, by each tensor's type at run time): dst element n =
// src element n in row-major order, any shapes of one element count and any strides. One
// invocation per element.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
  TensorDesc d = pc.p.t[0], s = pc.p.t[1];
  uint n = wg_index() * 256 + gl_LocalInvocationID.x;
  if (n >= nelements(d)) return;
  uvec4 is_ = unravel(n, s.ne), id = unravel(n, d.ne);
  float x = load_float(s.type, s.addr + elem_offset(s, is_.x, is_.y, is_.z, is_.w));
  store_float(d.type, d.addr + elem_offset(d, id.x, id.y, id.z, id.w), x);
}
