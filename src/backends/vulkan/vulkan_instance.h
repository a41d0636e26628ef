// VulkanInstance: the process's Vulkan instance and the physical devices kiln can compute on.
//
// create() loads an instance through the Khronos loader (Vulkan 1.2). A device is usable when it
// has a compute queue and the features the shaders need (buffer device addresses, 64-bit
// integers, 8- and 16-bit storage, 16-bit floats); every other device is listed with the reason.
// KILN_VULKAN_DEVICES ("0,2": indices in the loader's order) keeps only those devices, the role
// GGML_VK_VISIBLE_DEVICES plays for llama.cpp. KILN_VULKAN_VALIDATION=1 enables the Khronos
// validation layer; its messages go to stderr and are counted (validation_messages()).
//
// One instance per process (process()): made at the first call, kept until the process exits (never
// destroyed, so the drivers the loader opened stay loaded to the end: a leak checker then names
// their frames, and registries made later pay no driver start-up again).
// Ownership: devices made from it share it (shared_ptr).
// Thread-safety: process() is thread-safe; the instance is immutable after it is made but for the
// message count (atomic).
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace kiln {

struct VulkanPhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  uint32_t loader_index = 0;       // position in the loader's enumeration
  std::string name;                // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;              // driver name and info: "NVIDIA 550.54", "llvmpipe Mesa 22.3.6"
  uint32_t compute_family = 0;     // a queue family with compute
  uint32_t device_local_heap = 0;  // the largest device-local memory heap
  VkDeviceSize heap_bytes = 0;     // its size
  bool memory_budget = false;      // VK_EXT_memory_budget is present
  std::string unusable;            // empty when usable, else why not
};

class VulkanInstance {
 public:
  // The process's instance, made at the first call; the same Error at every call when there is
  // no loader or no driver ("vulkan: no Vulkan driver: ...").
  static Result<std::shared_ptr<VulkanInstance>> process();
  ~VulkanInstance();
  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;

  VkInstance handle() const { return instance_; }
  // Every device the loader lists (KILN_VULKAN_DEVICES applied), usable or not, in its order.
  const std::vector<VulkanPhysicalDevice>& devices() const { return devices_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation-layer warnings and errors reported since create().
  uint64_t validation_messages() const { return messages_.load(); }

 private:
  VulkanInstance() = default;
  static Result<std::shared_ptr<VulkanInstance>> create();
  Status enumerate();
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<VulkanPhysicalDevice> devices_;
  std::atomic<uint64_t> messages_{0};
};

}  // namespace kiln
