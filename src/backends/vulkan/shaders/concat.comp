#version 450
// Concat of src0 and src1 (F32, F16 or BF16, by each tensor's type at run time) along axis i[0]:
// dst element (i0..i3) is src0's where its index along the axis is below src0's size there, else
// src1's at that index less it. One invocation per dst element, any strides.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
  TensorDesc d = pc.p.t[0], a = pc.p.t[1], b = pc.p.t[2];
  uint n = wg_index() * 256 + gl_LocalInvocationID.x;
  if (n >= nelements(d)) return;
  uvec4 i = unravel(n, d.ne);
  uint axis = uint(pc.p.i[0]);
  uint split = a.ne[axis];
  float x;
  if (i[axis] < split) {
    x = load_float(a.type, a.addr + elem_offset(a, i.x, i.y, i.z, i.w));
  } else {
    i[axis] -= split;
    x = load_float(b.type, b.addr + elem_offset(b, i.x, i.y, i.z, i.w));
    i[axis] += split;
  }
  store_float(d.type, d.addr + elem_offset(d, i.x, i.y, i.z, i.w), x);
}
