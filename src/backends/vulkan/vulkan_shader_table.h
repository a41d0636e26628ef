// The SPIR-V of the Vulkan backend's compute shaders, compiled by glslc at build time and embedded
// (shaders/shaders.cmake generates the table). Thread-safe (constant data).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kiln {

// The words of shader variant `name` ("mul_mat_q4_0", "rms_norm", ...), or an empty span when the
// build has no such variant.
std::span<const uint32_t> vk_shader_spirv(std::string_view name);

}  // namespace kiln
