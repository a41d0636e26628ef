// VkResult as kiln errors. Thread-safe (pure).
#pragma once

#include <vulkan/vulkan.h>

#include "core/result.h"

namespace kiln {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... ("VkResult N" for a value without a name here).
const char* vk_result_name(VkResult r);

// ok for VK_SUCCESS, else an Error "<what>: <result name>".
Status vk_status(VkResult r, std::string_view what);

}  // namespace kiln
