#include "backends/vulkan/vulkan_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/vulkan/vk_status.h"
#include "backends/vulkan/vulkan_shader_table.h"

namespace kiln {

// A buffer of the device: its allocation is the device's (by base address); destroying the
// buffer releases it.
class VulkanDevice::VulkanBuffer : public Buffer {
 public:
  VulkanBuffer(VulkanDevice& device, void* base, size_t size, MemoryKind kind, std::string owner)
      : Buffer(device, base, size, kind, std::move(owner), /*host_visible=*/false, /*writable=*/true) {}
  ~VulkanBuffer() override { static_cast<VulkanDevice&>(device()).release(base(), size(), kind()); }
};

namespace {

// The first memory type allowed by `bits` with every flag of `want`, preferring none of `avoid`;
// -1 when none has `want`.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t bits, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags avoid) {
  int fallback = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
    if (!(bits & (1u << i)) || (f & want) != want) continue;
    if ((f & avoid) == 0) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

// A barrier that makes every earlier write visible to every later access, host reads included.
void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0,
                       nullptr);
}

}  // namespace

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::create(std::shared_ptr<VulkanInstance> instance,
                                                           const VulkanPhysicalDevice& physical,
                                                           const VulkanDeviceOptions& options) {
  if (!physical.unusable.empty())
    return make_error(options.name, " (", physical.name, "): ", physical.unusable);
  std::unique_ptr<VulkanDevice> d(new VulkanDevice());
  d->instance_ = std::move(instance);
  d->physical_ = physical;
  d->options_ = options;
  if (const Status st = d->init(); !st.ok()) return make_error(options.name, ": ", st.error().message);
  return d;
}

Status VulkanDevice::init() {
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = physical_.compute_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = VK_TRUE;
  f12.shaderInt8 = VK_TRUE;
  f12.shaderFloat16 = VK_TRUE;
  f12.storageBuffer8BitAccess = VK_TRUE;
  f12.scalarBlockLayout = VK_TRUE;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  features.features.shaderInt64 = VK_TRUE;
  std::vector<const char*> extensions;
  if (physical_.memory_budget) extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  KILN_TRY(vk_status(vkCreateDevice(physical_.handle, &ci, nullptr, &device_), "vkCreateDevice"));
  vkGetDeviceQueue(device_, physical_.compute_family, 0, &queue_);

  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &m3};
  vkGetPhysicalDeviceProperties2(physical_.handle, &props);
  max_allocation_ = m3.maxMemoryAllocationSize;

  // Memory types: buffers in device-local memory (not host-visible where the device has such a
  // type: a discrete GPU's VRAM), staging in host-visible coherent memory (not device-local where
  // possible: system RAM the GPU reads over the bus).
  VkBufferCreateInfo probe{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  probe.size = 256;
  probe.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  VkBuffer b = VK_NULL_HANDLE;
  KILN_TRY(vk_status(vkCreateBuffer(device_, &probe, nullptr, &b), "vkCreateBuffer"));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b, &req);
  vkDestroyBuffer(device_, b, nullptr);
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(physical_.handle, &mem);
  const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const int dev = find_memory_type(mem, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                   VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  const int host = find_memory_type(mem, req.memoryTypeBits, coherent, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (dev < 0 || host < 0) return make_error("no device-local or no host-visible memory type for storage buffers");
  device_type_ = static_cast<uint32_t>(dev);
  staging_type_ = static_cast<uint32_t>(host);
  mappable_ = (mem.memoryTypes[device_type_].propertyFlags & coherent) == coherent;

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = physical_.compute_family;
  KILN_TRY(vk_status(vkCreateCommandPool(device_, &pi, nullptr, &copy_pool_), "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = copy_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  KILN_TRY(vk_status(vkAllocateCommandBuffers(device_, &ai, &copy_cb_), "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KILN_TRY(vk_status(vkCreateFence(device_, &fi, nullptr, &copy_fence_), "vkCreateFence"));
  if (staging()) {
    KILN_ASSIGN_OR_RETURN(staging_, create_allocation(options_.staging_bytes, staging_type_, /*map=*/true));
  }

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(uint64_t)};
  VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &range;
  KILN_TRY(vk_status(vkCreatePipelineLayout(device_, &li, nullptr, &layout_), "vkCreatePipelineLayout"));
  return ok_status();
}

VulkanDevice::~VulkanDevice() {
  if (device_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(device_);
  for (auto& [name, p] : pipelines_) vkDestroyPipeline(device_, p, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
  destroy_allocation(staging_);
  for (auto& [addr, a] : allocations_) destroy_allocation(a);  // buffers outliving the device: a bug
  if (copy_fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, copy_fence_, nullptr);
  if (copy_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, copy_pool_, nullptr);
  vkDestroyDevice(device_, nullptr);
}

Result<VulkanDevice::Allocation> VulkanDevice::create_allocation(size_t bytes, uint32_t type, bool map) {
  Allocation a;
  a.bytes = bytes;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
             VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  KILN_TRY(vk_status(vkCreateBuffer(device_, &bi, nullptr, &a.buffer), "vkCreateBuffer"));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, a.buffer, &req);
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &flags};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (const VkResult r = vkAllocateMemory(device_, &ai, nullptr, &a.memory); r != VK_SUCCESS) {
    vkDestroyBuffer(device_, a.buffer, nullptr);
    return make_error("vkAllocateMemory: ", vk_result_name(r));
  }
  if (const VkResult r = vkBindBufferMemory(device_, a.buffer, a.memory, 0); r != VK_SUCCESS) {
    a.mapped = nullptr;
    destroy_allocation(a);
    return make_error("vkBindBufferMemory: ", vk_result_name(r));
  }
  if (map) {
    void* p = nullptr;
    if (const VkResult r = vkMapMemory(device_, a.memory, 0, VK_WHOLE_SIZE, 0, &p); r != VK_SUCCESS) {
      destroy_allocation(a);
      return make_error("vkMapMemory: ", vk_result_name(r));
    }
    a.mapped = static_cast<char*>(p);
  }
  return a;
}

void VulkanDevice::destroy_allocation(const Allocation& a) const {
  if (a.buffer != VK_NULL_HANDLE) vkDestroyBuffer(device_, a.buffer, nullptr);
  if (a.memory != VK_NULL_HANDLE) vkFreeMemory(device_, a.memory, nullptr);  // unmaps too
}

MemoryInfo VulkanDevice::memory_info() const {
  MemoryInfo m;
  m.total = physical_.heap_bytes;
  size_t used = 0;
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    used = used_;
  }
  m.free = m.total > used ? m.total - used : 0;
  if (physical_.memory_budget) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &budget};
    vkGetPhysicalDeviceMemoryProperties2(physical_.handle, &props);
    const VkDeviceSize b = budget.heapBudget[physical_.device_local_heap];
    const VkDeviceSize u = budget.heapUsage[physical_.device_local_heap];
    m.free = b > u ? b - u : 0;
  }
  return m;
}

Result<std::unique_ptr<Buffer>> VulkanDevice::allocate(const BufferDesc& desc) {
  const size_t bytes = std::max<size_t>(alignment(), (desc.bytes + alignment() - 1) / alignment() * alignment());
  auto refuse = [&](const std::string& why) {
    const MemoryInfo m = memory_info();
    return make_error(name(), ": cannot allocate ", desc.bytes, " bytes for '", desc.owner, "' (",
                      memory_kind_name(desc.kind), "): ", why, "; free ", m.free, " of ", m.total, " bytes");
  };
  if (max_allocation_ != 0 && bytes > max_allocation_)
    return refuse("larger than the driver's maxMemoryAllocationSize of " + std::to_string(max_allocation_) +
                  " bytes (buffers are not split yet)");
  auto made = create_allocation(bytes, device_type_, mappable_ && !options_.force_staging);
  if (!made.ok()) return refuse(made.error().message);
  Allocation a = *made;
  VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  info.buffer = a.buffer;
  const uintptr_t addr = static_cast<uintptr_t>(vkGetBufferDeviceAddress(device_, &info));
  if (options_.poison) {
    if (const Status st = fill(a.buffer, bytes); !st.ok()) {
      destroy_allocation(a);
      return refuse(st.error().message);
    }
  }
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    allocations_[addr] = a;
    used_ += bytes;
  }
  note_allocated(desc.kind, desc.bytes);
  return std::unique_ptr<Buffer>(
      new VulkanBuffer(*this, reinterpret_cast<void*>(addr), desc.bytes, desc.kind, desc.owner));
}

void VulkanDevice::release(const void* base, size_t bytes, MemoryKind kind) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(base));
    KILN_ASSERT(it != allocations_.end(), "VulkanDevice::release: not a buffer of this device");
    a = it->second;
    allocations_.erase(it);
    used_ -= a.bytes;
  }
  if (options_.poison) (void)fill(a.buffer, a.bytes);  // best effort: the memory goes anyway
  destroy_allocation(a);
  note_freed(kind, bytes);
}

bool VulkanDevice::holds(const void* addr, size_t n) const {
  const auto [buffer, offset] = locate(addr);
  if (buffer == VK_NULL_HANDLE) return false;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  auto it = allocations_.upper_bound(reinterpret_cast<uintptr_t>(addr));
  --it;
  return n <= it->second.bytes - offset;
}

std::pair<VkBuffer, VkDeviceSize> VulkanDevice::locate(const void* addr) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard<std::mutex> lock(alloc_mu_);
  auto it = allocations_.upper_bound(a);
  if (it == allocations_.begin()) return {VK_NULL_HANDLE, 0};
  --it;
  if (a - it->first >= it->second.bytes) return {VK_NULL_HANDLE, 0};
  return {it->second.buffer, a - it->first};
}

Status VulkanDevice::submit_and_wait(VkCommandBuffer cb, VkFence fence) const {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    KILN_TRY(vk_status(vkQueueSubmit(queue_, 1, &si, fence), name() + ": vkQueueSubmit"));
  }
  KILN_TRY(vk_status(vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX), name() + ": vkWaitForFences"));
  return vk_status(vkResetFences(device_, 1, &fence), name() + ": vkResetFences");
}

template <class F>
Status VulkanDevice::transfer(F&& record) const {
  KILN_TRY(vk_status(vkResetCommandBuffer(copy_cb_, 0), "vkResetCommandBuffer"));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_TRY(vk_status(vkBeginCommandBuffer(copy_cb_, &bi), "vkBeginCommandBuffer"));
  full_barrier(copy_cb_);
  record(copy_cb_);
  full_barrier(copy_cb_);
  KILN_TRY(vk_status(vkEndCommandBuffer(copy_cb_), "vkEndCommandBuffer"));
  return submit_and_wait(copy_cb_, copy_fence_);
}

Status VulkanDevice::fill(VkBuffer buffer, size_t bytes) const {
  std::lock_guard<std::mutex> lock(copy_mu_);
  return transfer([&](VkCommandBuffer cb) {
    vkCmdFillBuffer(cb, buffer, 0, bytes, kPoisonByte * 0x01010101u);
  });
}

Status VulkanDevice::copy_in(void* dst, const void* src, size_t n) {
  const auto [buffer, offset] = locate(dst);
  KILN_ASSERT(buffer != VK_NULL_HANDLE, "VulkanDevice::copy_in: range not in the device's memory");
  if (!staging()) {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    auto it = allocations_.upper_bound(reinterpret_cast<uintptr_t>(dst));
    std::memcpy((--it)->second.mapped + offset, src, n);
    return ok_status();
  }
  std::lock_guard<std::mutex> lock(copy_mu_);
  for (size_t done = 0; done < n;) {
    const size_t chunk = std::min(n - done, staging_.bytes);
    std::memcpy(staging_.mapped, static_cast<const char*>(src) + done, chunk);
    const VkBufferCopy region{0, offset + done, chunk};
    KILN_TRY(transfer([&](VkCommandBuffer cb) { vkCmdCopyBuffer(cb, staging_.buffer, buffer, 1, &region); }));
    done += chunk;
  }
  return ok_status();
}

Status VulkanDevice::copy_out(const void* src, void* dst, size_t n) const {
  const auto [buffer, offset] = locate(src);
  KILN_ASSERT(buffer != VK_NULL_HANDLE, "VulkanDevice::copy_out: range not in the device's memory");
  if (!staging()) {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    auto it = allocations_.upper_bound(reinterpret_cast<uintptr_t>(src));
    std::memcpy(dst, (--it)->second.mapped + offset, n);
    return ok_status();
  }
  std::lock_guard<std::mutex> lock(copy_mu_);
  for (size_t done = 0; done < n;) {
    const size_t chunk = std::min(n - done, staging_.bytes);
    const VkBufferCopy region{offset + done, 0, chunk};
    KILN_TRY(transfer([&](VkCommandBuffer cb) { vkCmdCopyBuffer(cb, buffer, staging_.buffer, 1, &region); }));
    std::memcpy(static_cast<char*>(dst) + done, staging_.mapped, chunk);
    done += chunk;
  }
  return ok_status();
}

Result<VkPipeline> VulkanDevice::pipeline(std::string_view shader) {
  std::lock_guard<std::mutex> lock(pipelines_mu_);
  auto it = pipelines_.find(std::string(shader));
  if (it != pipelines_.end()) return it->second;
  const std::span<const uint32_t> words = vk_shader_spirv(shader);
  if (words.empty()) return make_error(name(), ": no shader '", shader, "' in this build");
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = words.size_bytes();
  mi.pCode = words.data();
  VkShaderModule module = VK_NULL_HANDLE;
  KILN_TRY(vk_status(vkCreateShaderModule(device_, &mi, nullptr, &module), "vkCreateShaderModule"));
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = layout_;
  VkPipeline p = VK_NULL_HANDLE;
  const VkResult r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
  vkDestroyShaderModule(device_, module, nullptr);
  KILN_TRY(vk_status(r, name() + ": pipeline '" + std::string(shader) + "'"));
  pipelines_.emplace(std::string(shader), p);
  return p;
}

}  // namespace kiln
