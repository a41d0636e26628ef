// VulkanBackend: executes planned graphs on a VulkanDevice with the compute shaders of shaders/.
//
// execute() records the whole plan into one command buffer: the calls' parameters (VkCallParams,
// one per node) written into the backend's parameter buffer by vkCmdUpdateBuffer, then per node
// its pipeline, one push constant (the address of its parameters) and a dispatch, with a memory
// barrier between nodes; it submits the buffer and waits, so results are on the device when it
// returns (synchronize() has nothing left to wait for). prepare() refuses a plan with an op the
// shaders lack, naming the op and the device (never a fall-back to other numbers), makes the
// pipelines and sizes the parameter buffer, the backend's scratch: a resident of its own owner on
// the device's residency manager, never evicted.
//
// Ownership: non-owning of the device, which must outlive the backend.
// Thread-safety: one execute() at a time per backend; backends over one device may execute
// concurrently (the device serializes queue submissions).
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <vector>

#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_ops.h"
#include "runtime/backend.h"
#include "runtime/residency.h"

namespace kiln {

class VulkanBackend : public Backend, private Evictable {
 public:
  // Aborts with the Vulkan error if the command pool cannot be made (the device is unusable).
  explicit VulkanBackend(VulkanDevice& device);
  ~VulkanBackend() override;
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  Device& device() const override { return *device_; }
  bool supports_op(const OpCall& call) const override { return vk_check_op(call).ok(); }
  Status prepare(const ExecPlan& plan) override;
  Status execute(ExecPlan& plan) override;
  void synchronize() override {}
  void release_scratch() override { params_.reset(); }
  size_t scratch_bytes() const override { return params_ ? params_->size() : 0; }

 private:
  Status evict() override;
  Status restore() override { return ok_status(); }
  Status record(const ExecPlan& plan);

  VulkanDevice* device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  Resident params_resident_;  // before params_: outlives it
  std::unique_ptr<Buffer> params_;
  std::vector<VkCallParams> params_host_;  // execute()'s parameters before they are recorded
  std::vector<VkPipeline> pipelines_;      // per node of the last plan recorded
  std::vector<uint64_t> groups_;           // per node
};

}  // namespace kiln
