#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>

#include "backends/vulkan/vk_status.h"

namespace kiln {
namespace {

constexpr uint64_t kMaxGroupsX = 65535;        // the smallest maxComputeWorkGroupCount[0] Vulkan allows
constexpr size_t kUpdateChunk = size_t{65536};  // vkCmdUpdateBuffer's limit per command

void compute_barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkPipelineStageFlags dst) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  vkCmdPipelineBarrier(cb, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
}

// Aborts with the error: a backend over a device whose command pool cannot be made is unusable.
void must(const Status& st) { KILN_ASSERT(st.ok(), st.ok() ? std::string() : st.error().message); }

}  // namespace

VulkanBackend::VulkanBackend(VulkanDevice& device) : device_(&device) {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = device.queue_family();
  must(vk_status(vkCreateCommandPool(device.handle(), &pi, nullptr, &pool_), "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  must(vk_status(vkAllocateCommandBuffers(device.handle(), &ai, &cb_), "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  must(vk_status(vkCreateFence(device.handle(), &fi, nullptr, &fence_), "vkCreateFence"));
  params_resident_.attach(device, new_owner_id(), device.name() + " shader parameters", MemoryKind::Scratch,
                          "allocated again by prepare()", this);
}

VulkanBackend::~VulkanBackend() {
  params_.reset();
  vkDestroyFence(device_->handle(), fence_, nullptr);
  vkDestroyCommandPool(device_->handle(), pool_, nullptr);  // frees cb_
}

Status VulkanBackend::evict() { return make_error(device_->name(), ": shader parameters are not evictable"); }

Status VulkanBackend::prepare(const ExecPlan& plan) {
  for (const OpCall& call : plan.calls()) {
    if (const Status st = vk_check_op(call); !st.ok())
      return make_error(device_->name(), ": ", st.error().message);
    VkCallParams unused;
    KILN_ASSIGN_OR_RETURN(const VkPipeline made, device_->pipeline(vk_plan_op(call, unused).shader));
    (void)made;  // made now, found again by execute()
  }
  const size_t need = std::max<size_t>(1, plan.calls().size()) * sizeof(VkCallParams);
  if (scratch_bytes() >= need) return ok_status();
  params_.reset();
  KILN_ASSIGN_OR_RETURN(params_, params_resident_.allocate(BufferDesc{need, MemoryKind::Scratch,
                                                                       device_->name() + " shader parameters"}));
  return ok_status();
}

Status VulkanBackend::execute(ExecPlan& plan) {
  if (&plan.arena().device() != device_) {
    return make_error(device_->name(), ": plan's arena '", plan.arena().owner(), "' is on device '",
                      plan.arena().device().name(), "'");
  }
  const size_t need = plan.calls().size() * sizeof(VkCallParams);
  if (scratch_bytes() < need) {
    return make_error(device_->name(), ": plan needs ", need, " bytes of shader parameters, the backend holds ",
                      scratch_bytes(), ": call prepare()");
  }
  KILN_TRY(plan.resolve_device_calls(*device_));
  const std::vector<OpCall>& calls = plan.calls();
  params_host_.resize(calls.size());
  pipelines_.resize(calls.size());
  groups_.resize(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const VkOpDispatch d = vk_plan_op(calls[i], params_host_[i]);
    KILN_ASSIGN_OR_RETURN(pipelines_[i], device_->pipeline(d.shader));
    groups_[i] = d.groups;
  }
  KILN_TRY(record(plan));
  return device_->submit_and_wait(cb_, fence_);
}

Status VulkanBackend::record(const ExecPlan& plan) {
  KILN_TRY(vk_status(vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer"));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_TRY(vk_status(vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer"));
  // Earlier submissions' writes (copies, other backends' graphs) before this one's reads.
  compute_barrier(cb_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  const auto [params_buffer, params_offset] = device_->locate(params_->base());
  const size_t bytes = params_host_.size() * sizeof(VkCallParams);
  const auto* src = reinterpret_cast<const char*>(params_host_.data());
  for (size_t done = 0; done < bytes; done += kUpdateChunk) {
    vkCmdUpdateBuffer(cb_, params_buffer, params_offset + done, std::min(kUpdateChunk, bytes - done), src + done);
  }
  compute_barrier(cb_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
  const uint64_t params_addr = reinterpret_cast<uintptr_t>(params_->base());
  for (size_t i = 0; i < plan.calls().size(); ++i) {
    if (groups_[i] == 0) continue;
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_[i]);
    const uint64_t addr = params_addr + i * sizeof(VkCallParams);
    vkCmdPushConstants(cb_, device_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(addr), &addr);
    const uint64_t x = std::min(groups_[i], kMaxGroupsX);
    vkCmdDispatch(cb_, static_cast<uint32_t>(x), static_cast<uint32_t>((groups_[i] + x - 1) / x), 1);
    compute_barrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
  }
  VkMemoryBarrier host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  host.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_MEMORY_READ_BIT;
  vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &host, 0, nullptr, 0,
                       nullptr);
  return vk_status(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
}

}  // namespace kiln
