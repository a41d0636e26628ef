#version 450
// Element-wise ops on F32, one invocation per dst element, any strides. OP picks the op at compile
// time: OP_ADD, OP_MUL (src1 repeated over src0 as ggml_can_repeat allows), OP_SCALE (f[0]),
// OP_SILU, OP_GELU, OP_GELU_QUICK (rounded through F16 as the CPU's F16 tables are), OP_SWIGLU
// (silu(src0) * src1).
#include "common.glsl"

layout(local_size_x = 256) in;

float gelu_tanh(float x) {
  const float k = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * x * (1.0 + tanh(k * x * (1.0 + 0.044715 * x * x)));
}
float f16_round(float x) { return float(float16_t(x)); }

void main() {
  TensorDesc d = pc.p.t[0], a = pc.p.t[1];
  uint n = wg_index() * 256 + gl_LocalInvocationID.x;
  if (n >= nelements(d)) return;
  uvec4 i = unravel(n, d.ne);
  float x = F32s(a.addr + elem_offset(a, i.x, i.y, i.z, i.w)).v[0];
  float y;
#if defined(OP_ADD) || defined(OP_MUL) || defined(OP_SWIGLU)
  TensorDesc b = pc.p.t[2];
  float z = F32s(b.addr + elem_offset(b, i.x % b.ne[0], i.y % b.ne[1], i.z % b.ne[2], i.w % b.ne[3])).v[0];
#endif
#if defined(OP_ADD)
  y = x + z;
#elif defined(OP_MUL)
  y = x * z;
#elif defined(OP_SCALE)
  y = x * pc.p.f[0];
#elif defined(OP_SILU)
  y = x / (1.0 + exp(-x));
#elif defined(OP_SWIGLU)
  y = x / (1.0 + exp(-x)) * z;
#elif defined(OP_GELU)
  y = x <= -10.0 ? 0.0 : x >= 10.0 ? x : f16_round(gelu_tanh(f16_round(x)));
#elif defined(OP_GELU_QUICK)
  float xr = f16_round(x);
  y = f16_round(xr / (1.0 + exp(-1.702 * xr)));
#endif
  F32s(d.addr + elem_offset(d, i.x, i.y, i.z, i.w)).v[0] = y;
}
