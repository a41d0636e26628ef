// How the Vulkan backend runs each op: the shader variant, the workgroup count and the parameters
// (CallParams, mirrored byte for byte by shaders/common.glsl). Thread-safe (pure).
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "ops/op.h"

namespace kiln {

// One tensor as the shaders see it: device address, sizes, byte strides, kiln's DType value.
struct VkTensorDesc {
  uint64_t addr = 0;
  uint32_t ne[4] = {1, 1, 1, 1};
  uint32_t nb[4] = {0, 0, 0, 0};
  uint32_t type = 0;
  uint32_t pad = 0;
};

// Per call: t[0] the destination, t[1 + i] source i; the op's float and integer parameters (their
// meaning per shader is in the shader's opening comment).
struct VkCallParams {
  VkTensorDesc t[5];
  float f[8] = {};
  int32_t i[8] = {};
};
static_assert(sizeof(VkTensorDesc) == 48 && sizeof(VkCallParams) == 304, "must match shaders/common.glsl");

struct VkOpDispatch {
  std::string shader;   // a variant of vulkan_shader_table.h
  uint64_t groups = 0;  // workgroups, folded into x and y by the backend
};

// Whether the Vulkan shaders run `call` (types, layouts and sizes): ok, or an Error
// "[op] what: numbers" naming what is missing.
Status vk_check_op(const OpCall& call);
// The dispatch of `call` (vk_check_op must accept it); fills `params` from the call's views, whose
// data are device addresses.
VkOpDispatch vk_plan_op(const OpCall& call, VkCallParams& params);

}  // namespace kiln
