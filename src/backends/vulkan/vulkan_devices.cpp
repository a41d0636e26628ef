#include "backends/vulkan/vulkan_devices.h"

#include "backends/vulkan/env_flag.h"
#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_instance.h"

namespace kiln {

FoundVulkanDevices find_vulkan_devices() {
  FoundVulkanDevices found;
  auto instance = VulkanInstance::process();
  if (!instance.ok()) {
    found.notes.push_back("no Vulkan device found: " + instance.error().message);
    return found;
  }
  for (const VulkanPhysicalDevice& pd : (*instance)->devices()) {
    if (!pd.unusable.empty()) {
      found.notes.push_back("Vulkan device " + std::to_string(pd.loader_index) + " '" + pd.name +
                            "' is not used: " + pd.unusable);
      continue;
    }
    VulkanDeviceOptions o;
    o.name = "vulkan" + std::to_string(found.devices.size());
    o.force_staging = env_flag("KILN_VULKAN_FORCE_STAGING");
    o.poison = env_flag("KILN_VULKAN_POISON");
    auto dev = VulkanDevice::create(*instance, pd, o);
    if (!dev.ok()) {
      found.notes.push_back("Vulkan device " + std::to_string(pd.loader_index) + " '" + pd.name +
                            "' is not used: " + dev.error().message);
      continue;
    }
    VulkanDevice* d = dev->get();
    found.devices.push_back({std::move(*dev), pd.name + " (" + pd.driver + ")",
                             [d] { return std::make_unique<VulkanBackend>(*d); }});
  }
  if (found.devices.empty() && found.notes.empty()) found.notes.push_back("no Vulkan device found");
  return found;
}

}  // namespace kiln
