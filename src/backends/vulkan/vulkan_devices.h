// The Vulkan devices of this machine, made for the device registry (backends/device_registry.h):
// one VulkanDevice per usable physical device (vulkan_instance.h), named vulkan0, vulkan1, ... in
// the loader's order after KILN_VULKAN_DEVICES, each with a factory of its backends.
// KILN_VULKAN_FORCE_STAGING=1 and KILN_VULKAN_POISON=1 set the devices' options (vulkan_device.h).
// Thread-safety: call from one thread (the registry's create()).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/device.h"

namespace kiln {

struct FoundDevice {
  std::unique_ptr<Device> device;
  std::string description;  // "<device name> (<driver>)"
  std::function<std::unique_ptr<Backend>()> make_backend;  // over `device`, which must outlive them
};

struct FoundVulkanDevices {
  std::vector<FoundDevice> devices;
  // What --list-devices says besides the devices: no driver, devices skipped and why.
  std::vector<std::string> notes;
};

FoundVulkanDevices find_vulkan_devices();

}  // namespace kiln
