#version 450
// ArgMax: dst I32 [r1 * r2 * r3], the first index of the maximum of each F32 row. One workgroup per
// row; ties go to the lower index.
#include "common.glsl"

#define WG 256
layout(local_size_x = WG) in;
shared float best[WG];
shared uint where_[WG];

void main() {
  TensorDesc d = pc.p.t[0], a = pc.p.t[1];
  uint r = wg_index();
  if (r >= a.ne[1] * a.ne[2] * a.ne[3]) return;
  uint i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
  uint tid = gl_LocalInvocationID.x;
  uint64_t src = row_addr(a, i1, i2, i3);
  float b = -1.0 / 0.0;
  uint at = 0xffffffffu;
  for (uint j = tid; j < a.ne[0]; j += WG) {
    float v = F32s(src + uint64_t(j) * a.nb[0]).v[0];
    if (v > b || at == 0xffffffffu) { b = v; at = j; }
  }
  best[tid] = b;
  where_[tid] = at;
  barrier();
  for (uint h = WG / 2; h > 0; h /= 2) {
    if (tid < h) {
      float ob = best[tid + h];
      uint oa = where_[tid + h];
      if (oa != 0xffffffffu && (where_[tid] == 0xffffffffu || ob > best[tid] || (ob == best[tid] && oa < where_[tid]))) {
        best[tid] = ob;
        where_[tid] = oa;
      }
    }
    barrier();
  }
  if (tid == 0) I32s(d.addr + uint64_t(r) * d.nb[0]).v[0] = int(where_[0]);
}
