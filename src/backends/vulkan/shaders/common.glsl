// Shared by every kiln compute shader: the call parameters and typed views of device memory.
//
// Every dispatch gets one push constant, the device address of its CallParams (written by the
// backend, backends/vulkan/vulkan_call_params.h, whose C++ struct mirrors this one byte for byte):
// the destination and up to four sources, each as a device address with ggml's sizes (ne, elements
// per dimension, ne[0] innermost) and byte strides (nb), and the op's scalar parameters. Memory is
// reached through buffer device addresses (GL_EXT_buffer_reference), so tensors are not limited by
// maxStorageBufferRange and no descriptor sets are needed.
// Work is laid out in a grid of workgroups folded into x and y (x at most 65535): wg_index() is
// the linear workgroup index; shaders return when it is past their work.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_scalar_block_layout : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

struct TensorDesc {
  uint64_t addr;
  uint ne[4];
  uint nb[4];
  uint type;  // kiln's DType value
  uint pad;
};

layout(buffer_reference, scalar, buffer_reference_align = 8) readonly buffer CallParams {
  TensorDesc t[5];  // t[0]: dst, t[1 + i]: src i
  float f[8];
  int i[8];
};

layout(push_constant) uniform Push { CallParams p; } pc;

layout(buffer_reference, scalar, buffer_reference_align = 4) buffer F32s { float v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 2) buffer F16s { float16_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 2) buffer U16s { uint16_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer U8s { uint8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 1) buffer I8s { int8_t v[]; };
layout(buffer_reference, scalar, buffer_reference_align = 4) buffer I32s { int v[]; };

// kiln's DType values (core/dtype.h) that shaders branch on at run time.
const uint DT_F32 = 0u;
const uint DT_F16 = 1u;
const uint DT_BF16 = 30u;

uint wg_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

// Byte offset of element (i0, i1, i2, i3) of tensor t.
uint64_t elem_offset(TensorDesc t, uint i0, uint i1, uint i2, uint i3) {
  return uint64_t(i0) * t.nb[0] + uint64_t(i1) * t.nb[1] + uint64_t(i2) * t.nb[2] + uint64_t(i3) * t.nb[3];
}
uint64_t row_addr(TensorDesc t, uint i1, uint i2, uint i3) {
  return t.addr + uint64_t(i1) * t.nb[1] + uint64_t(i2) * t.nb[2] + uint64_t(i3) * t.nb[3];
}

// A float of a float-typed tensor (F32, F16, BF16) at byte address a.
float load_float(uint type, uint64_t a) {
  if (type == DT_F16) return float(F16s(a).v[0]);
  if (type == DT_BF16) return uintBitsToFloat(uint(U16s(a).v[0]) << 16);
  return F32s(a).v[0];
}
// Stores x at byte address a of a float-typed tensor, rounded as the CPU rounds (F16: to nearest
// even; BF16: to nearest even, NaN kept quiet).
void store_float(uint type, uint64_t a, float x) {
  if (type == DT_F16) {
    F16s(a).v[0] = float16_t(x);
  } else if (type == DT_BF16) {
    uint u = floatBitsToUint(x);
    uint r = ((u & 0x7fffffffu) > 0x7f800000u) ? ((u >> 16) | 64u) : ((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
    U16s(a).v[0] = uint16_t(r);
  } else {
    F32s(a).v[0] = x;
  }
}

// Splits linear index n over sizes ne[0..3] (ne[0] fastest).
uvec4 unravel(uint n, uint ne[4]) {
  uvec4 r;
  r.x = n % ne[0]; n /= ne[0];
  r.y = n % ne[1]; n /= ne[1];
  r.z = n % ne[2];
  r.w = n / ne[2];
  return r;
}
uint nelements(TensorDesc t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }
