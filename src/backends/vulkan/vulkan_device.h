// VulkanDevice: one Vulkan physical device as a kiln Device (memory) with its compute queue.
//
// Buffers are VkBuffers, each bound to its own VkDeviceMemory allocation, created with buffer device
// addresses: a buffer's base() is its GPU virtual address, which the shaders dereference
// (GL_EXT_buffer_reference); the CPU never does (host_address() is null, is_host() false). Memory
// comes from a device-local memory type; data moves in and out through a persistent host-visible
// staging buffer, in chunks, each a copy command fenced before the call returns, unless the
// device-local type is also host-visible (integrated GPUs, lavapipe) and staging is not forced:
// then the copies are memcpys through a persistent mapping. Options (from the environment when
// the registry makes the device): KILN_VULKAN_FORCE_STAGING=1 takes the discrete-GPU path on such
// a device (tests exercise it on lavapipe); KILN_VULKAN_POISON=1 fills fresh and freed memory with
// 0xFF bytes as the sim device does (reads of memory never written give NaN).
//
// Memory figures: total is the device-local heap; free comes from VK_EXT_memory_budget where the
// driver has it (the heap's budget less its usage by every process), else from kiln's own count
// (the heap less what this device allocated). An allocation larger than the driver's
// maxMemoryAllocationSize is refused with the numbers (no splitting yet), as is one the driver
// cannot satisfy (VK_ERROR_OUT_OF_DEVICE_MEMORY): "vulkan0: cannot allocate N bytes ...".
//
// Ownership: shares the instance; Buffers must be destroyed before the device.
// Thread-safety: thread-safe. Queue submissions are serialized by a mutex (the backends of several
// contexts share the queue); copies are serialized by another.
#pragma once

#include <vulkan/vulkan.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backends/vulkan/vulkan_instance.h"
#include "runtime/device.h"

namespace kiln {

struct VulkanDeviceOptions {
  std::string name = "vulkan0";
  bool force_staging = false;  // copies through the staging buffer even where memory is mappable
  bool poison = false;         // fill fresh and freed memory with kPoisonByte
  size_t staging_bytes = size_t{16} << 20;
};

class VulkanDevice : public Device {
 public:
  // An Error when `physical` is unusable (its reason) or a Vulkan call fails.
  static Result<std::unique_ptr<VulkanDevice>> create(std::shared_ptr<VulkanInstance> instance,
                                                      const VulkanPhysicalDevice& physical,
                                                      const VulkanDeviceOptions& options);
  ~VulkanDevice() override;
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  const std::string& name() const override { return options_.name; }
  bool is_host() const override { return false; }
  MemoryInfo memory_info() const override;
  size_t alignment() const override { return 256; }
  Result<std::unique_ptr<Buffer>> allocate(const BufferDesc& desc) override;
  void* host_address(const void*, size_t) const override { return nullptr; }
  bool holds(const void* addr, size_t n) const override;
  bool reads_host_weight_layouts() const override { return false; }
  std::optional<size_t> largest_free_block() const override { return memory_info().free; }

  const VulkanPhysicalDevice& physical() const { return physical_; }
  const VulkanInstance& instance() const { return *instance_; }
  VkDevice handle() const { return device_; }
  uint32_t queue_family() const { return physical_.compute_family; }
  // Whether copies go through the staging buffer (else through mappings).
  bool staging() const { return !mappable_ || options_.force_staging; }
  // Where device address `addr` lies: its VkBuffer and the offset in it (VK_NULL_HANDLE when it is
  // not in a live buffer of this device).
  std::pair<VkBuffer, VkDeviceSize> locate(const void* addr) const;
  // Submits `cb` to the compute queue, signalling `fence`, and waits for it; resets the fence.
  Status submit_and_wait(VkCommandBuffer cb, VkFence fence) const;
  // The compute pipeline of shader variant `shader` (vulkan_shader_table.h), made at its first
  // use; every pipeline has pipeline_layout(): one push constant, the CallParams' address.
  Result<VkPipeline> pipeline(std::string_view shader);
  VkPipelineLayout pipeline_layout() const { return layout_; }

  static constexpr unsigned char kPoisonByte = 0xFF;

 protected:
  Status copy_in(void* dst, const void* src, size_t n) override;
  Status copy_out(const void* src, void* dst, size_t n) const override;

 private:
  class VulkanBuffer;
  struct Allocation {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    size_t bytes = 0;
    char* mapped = nullptr;  // persistent mapping when copies are memcpys
  };
  VulkanDevice() = default;
  Status init();
  // Creates a buffer bound to new memory of type `type` (its own allocation).
  Result<Allocation> create_allocation(size_t bytes, uint32_t type, bool map);
  void destroy_allocation(const Allocation& a) const;
  void release(const void* base, size_t bytes, MemoryKind kind);  // bytes: the Buffer's size()
  // Records `record` into the transfer command buffer, submits it and waits. Under copy_mu_.
  template <class F>
  Status transfer(F&& record) const;
  Status fill(VkBuffer buffer, size_t bytes) const;

  std::shared_ptr<VulkanInstance> instance_;
  VulkanPhysicalDevice physical_;
  VulkanDeviceOptions options_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t device_type_ = 0;   // memory type of buffers
  uint32_t staging_type_ = 0;  // host-visible, coherent memory type of the staging buffer
  bool mappable_ = false;      // device_type_ is host-visible and coherent
  VkDeviceSize max_allocation_ = 0;
  mutable std::mutex queue_mu_;

  mutable std::mutex alloc_mu_;
  std::map<uintptr_t, Allocation> allocations_;  // by device address; guarded by alloc_mu_
  size_t used_ = 0;                              // guarded by alloc_mu_

  mutable std::mutex copy_mu_;  // guards the transfer objects and the staging buffer
  VkCommandPool copy_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer copy_cb_ = VK_NULL_HANDLE;
  VkFence copy_fence_ = VK_NULL_HANDLE;
  Allocation staging_;

  std::mutex pipelines_mu_;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::unordered_map<std::string, VkPipeline> pipelines_;  // guarded by pipelines_mu_
};

}  // namespace kiln
