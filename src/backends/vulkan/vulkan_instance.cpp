#include "backends/vulkan/vulkan_instance.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "backends/vulkan/env_flag.h"
#include "backends/vulkan/vk_status.h"

namespace kiln {
namespace {


// KILN_VULKAN_DEVICES as loader indices; empty: every device. An Error for a malformed list.
Result<std::vector<uint32_t>> visible_devices() {
  std::vector<uint32_t> out;
  const char* v = std::getenv("KILN_VULKAN_DEVICES");
  if (v == nullptr || *v == '\0') return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const unsigned long i = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || i > 64)
      return make_error("KILN_VULKAN_DEVICES='", v, "': expected indices such as 0,1");
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  for (const auto& e : ext) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

// What the shaders need that `pd` lacks, or "".
std::string missing_features(VkPhysicalDevice pd) {
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  vkGetPhysicalDeviceFeatures2(pd, &f);
  std::string missing;
  auto need = [&](VkBool32 have, const char* what) {
    if (!have) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  need(f12.bufferDeviceAddress, "bufferDeviceAddress");
  need(f.features.shaderInt64, "shaderInt64");
  need(f12.shaderInt8, "shaderInt8");
  need(f12.shaderFloat16, "shaderFloat16");
  need(f12.storageBuffer8BitAccess, "storageBuffer8BitAccess");
  need(f11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  need(f12.scalarBlockLayout, "scalarBlockLayout");
  return missing;
}

}  // namespace

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanInstance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                          VkDebugUtilsMessageTypeFlagsEXT,
                                                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                          void* self) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  static_cast<VulkanInstance*>(self)->messages_.fetch_add(1);
  std::fprintf(stderr, "vulkan validation: %s\n", data->pMessage != nullptr ? data->pMessage : "(no message)");
  return VK_FALSE;
}

Result<std::shared_ptr<VulkanInstance>> VulkanInstance::process() {
  static std::mutex mu;
  // Never destroyed (see the header): a heap object the static keeps reachable.
  static auto* made = new Result<std::shared_ptr<VulkanInstance>>(make_error("vulkan: not made yet"));
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried) {
    *made = create();
    tried = true;
  }
  return *made;
}

Result<std::shared_ptr<VulkanInstance>> VulkanInstance::create() {
  std::shared_ptr<VulkanInstance> vi(new VulkanInstance());
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  const bool validate = env_flag("KILN_VULKAN_VALIDATION");
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = &VulkanInstance::on_message;
  mi.pUserData = vi.get();
  if (validate) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &ext;
    ci.pNext = &mi;
  }
  const VkResult r = vkCreateInstance(&ci, nullptr, &vi->instance_);
  if (r != VK_SUCCESS) {
    vi->instance_ = VK_NULL_HANDLE;
    if (validate && r == VK_ERROR_LAYER_NOT_PRESENT)
      return make_error("vulkan: KILN_VULKAN_VALIDATION=1 but the Khronos validation layer is not installed");
    return make_error("vulkan: no Vulkan driver (vkCreateInstance: ", vk_result_name(r), ")");
  }
  if (validate) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(vi->instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create_messenger == nullptr || create_messenger(vi->instance_, &mi, nullptr, &vi->messenger_) != VK_SUCCESS)
      return make_error("vulkan: cannot install the validation messenger");
  }
  KILN_TRY(vi->enumerate());
  return vi;
}

Status VulkanInstance::enumerate() {
  KILN_ASSIGN_OR_RETURN(const std::vector<uint32_t> visible, visible_devices());
  uint32_t n = 0;
  KILN_TRY(vk_status(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices"));
  std::vector<VkPhysicalDevice> pds(n);
  KILN_TRY(vk_status(vkEnumeratePhysicalDevices(instance_, &n, pds.data()), "vkEnumeratePhysicalDevices"));
  for (uint32_t i = 0; i < n; ++i) {
    if (!visible.empty() && std::find(visible.begin(), visible.end(), i) == visible.end()) continue;
    VulkanPhysicalDevice d;
    d.handle = pds[i];
    d.loader_index = i;
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &driver};
    vkGetPhysicalDeviceProperties2(pds[i], &props);
    d.name = props.properties.deviceName;
    d.driver = std::string(driver.driverName) + " " + driver.driverInfo;
    if (props.properties.apiVersion < VK_API_VERSION_1_2) d.unusable = "Vulkan 1.2 is required";
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, qf.data());
    bool compute = false;
    for (uint32_t q = 0; q < nq && !compute; ++q) {
      if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        d.compute_family = q;
        compute = true;
      }
    }
    if (!compute && d.unusable.empty()) d.unusable = "no compute queue";
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pds[i], &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
      if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mem.memoryHeaps[h].size > d.heap_bytes) {
        d.heap_bytes = mem.memoryHeaps[h].size;
        d.device_local_heap = h;
      }
    }
    d.memory_budget = has_extension(pds[i], VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (d.unusable.empty()) {
      const std::string missing = missing_features(pds[i]);
      if (!missing.empty()) d.unusable = "lacks " + missing;
    }
    devices_.push_back(std::move(d));
  }
  return ok_status();
}

VulkanInstance::~VulkanInstance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy != nullptr) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

}  // namespace kiln
