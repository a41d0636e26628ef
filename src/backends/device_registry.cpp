#include "backends/device_registry.h"

#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"
#include "runtime/resident_arena.h"
#include "runtime/swap_file.h"
#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_devices.h"
#endif

namespace kiln {

struct DeviceRegistry::Entry {
  Device* device;
  std::string kind, description;
  std::function<std::unique_ptr<Backend>()> make_backend;
  std::unique_ptr<Backend> backend;
};

bool is_sim_device_name(std::string_view name) {
  if (!name.starts_with("sim")) return false;
  const std::string_view digits = name.substr(3);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool is_vulkan_device_name(std::string_view name) {
  if (!name.starts_with("vulkan") && !name.starts_with("Vulkan")) return false;
  const std::string_view digits = name.substr(6);
  return !digits.empty() && digits.size() <= 9 &&
         digits.find_first_not_of("0123456789") == std::string_view::npos;
}

Result<std::unique_ptr<DeviceRegistry>> DeviceRegistry::create(const DeviceRegistryOptions& options) {
  if (!options.swap_dir.empty()) {
    if (const Status st = check_swap_dir(options.swap_dir); !st.ok())
      return make_error("--swap-dir ", options.swap_dir, ": ", st.error().message);
  }
  std::unique_ptr<DeviceRegistry> r(new DeviceRegistry());
  r->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  r->cpu_ = std::make_unique<CpuDevice>();
  CpuDevice* cpu = r->cpu_.get();
  ThreadPool* pool = r->pool_.get();
  r->entries_.push_back(
      {cpu, "cpu", "host RAM", [cpu, pool] { return std::make_unique<CpuBackend>(*cpu, *pool); }, {}});
  if (options.vulkan) {
#ifdef KILN_HAVE_VULKAN
    FoundVulkanDevices found = find_vulkan_devices();
    r->notes_ = std::move(found.notes);
    for (FoundDevice& f : found.devices) {
      r->entries_.push_back({f.device.get(), "vulkan", f.description, std::move(f.make_backend), {}});
      r->gpus_.push_back(std::move(f.device));
    }
#else
    r->notes_.push_back("this build has no Vulkan backend (built without the Vulkan headers, loader or glslc)");
#endif
  }
  for (const SimDeviceOptions& so : options.sim) {
    if (!is_sim_device_name(so.name))
      return make_error("device '", so.name, "': sim devices are named sim0, sim1, ...");
    for (const auto& s : r->sims_) {
      if (s->name() == so.name) return make_error("device '", so.name, "' is given twice");
    }
    SimDeviceOptions shared = so;
    if (!options.sim_shared_dir.empty()) shared.shared_dir = options.sim_shared_dir;
    KILN_ASSIGN_OR_RETURN(auto sim, SimDevice::create(shared));
    SimDevice* dev = sim.get();
    r->sims_.push_back(std::move(sim));
    r->entries_.push_back({dev,
                           "sim",
                           "simulated accelerator, not host-visible",
                           [dev, pool] { return std::make_unique<SimBackend>(*dev, *pool); },
                           {}});
  }
  for (const DeviceBudget& b : options.budgets) {
    bool found = false;
    for (const DeviceBudget& other : options.budgets) {
      if (&other != &b && other.device == b.device)
        return make_error("--max-mem: device '", b.device, "' is given twice");
    }
    for (const Entry& e : r->entries_) found = found || e.device->name() == b.device;
    if (!found) {
      auto missing = r->find(b.device);
      return make_error("--max-mem: ", missing.ok() ? "device '" + b.device + "' is 'cpu'" : missing.error().message);
    }
  }
  for (Entry& e : r->entries_) {
    size_t budget = kNoBudget;
    for (const DeviceBudget& b : options.budgets) {
      if (b.device != e.device->name()) continue;
      KILN_ASSIGN_OR_RETURN(budget, budget_bytes(b, e.device->memory_info().total));
    }
    r->managers_.push_back(std::make_unique<ResidencyManager>(*e.device, budget, options.swap_dir));
    e.backend = e.make_backend();
  }
  r->arenas_.resize(r->entries_.size());
  return r;
}

Result<size_t> budget_bytes(const DeviceBudget& b, size_t total) {
  constexpr double kGiB = static_cast<double>(size_t{1} << 30);
  const double bytes = b.gib >= 0 ? b.gib * kGiB : static_cast<double>(total) + b.gib * kGiB;
  if (!(bytes >= 1.0))
    return make_error("--max-mem: ", b.device, "=", b.gib, " leaves no memory (the device has ", total, " bytes)");
  return static_cast<size_t>(bytes);
}

DeviceRegistry::~DeviceRegistry() {
  for (Entry& e : entries_) e.backend.reset();  // backend scratch is device memory: before the managers
  arenas_.clear();
}

ComputeArena& DeviceRegistry::arena(const Device& device) const {
  const size_t i = static_cast<size_t>(&entry(device) - entries_.data());
  std::lock_guard<std::mutex> lock(arenas_mu_);
  if (!arenas_[i]) {
    Device& dev = *entries_[i].device;
    arenas_[i] = std::make_unique<ResidentArena>(dev, new_owner_id(), "compute (" + dev.name() + ")");
  }
  return arenas_[i]->arena();
}

ResidencyManager& DeviceRegistry::residency(const Device& device) const {
  return *managers_[static_cast<size_t>(&entry(device) - entries_.data())];
}

std::vector<DeviceMemoryBreakdown> DeviceRegistry::memory_breakdown() const {
  std::vector<DeviceMemoryBreakdown> out;
  for (const auto& m : managers_) out.push_back(m->breakdown());
  return out;
}

Result<Device*> DeviceRegistry::find(std::string_view name) const {
  if (name == "none") return static_cast<Device*>(cpu_.get());
  const std::string wanted = is_vulkan_device_name(name) ? "vulkan" + std::string(name.substr(6)) : std::string(name);
  std::string names;
  for (const Entry& e : entries_) {
    if (e.device->name() == wanted) return e.device;
    names += (names.empty() ? "" : ", ") + e.device->name();
  }
  if (is_sim_device_name(name))
    return make_error("device '", name, "' does not exist here (devices: ", names,
                      "); name it to --sim-capacity");
  if (is_vulkan_device_name(name)) {
    std::string why;
    for (const std::string& n : notes_) why += "; " + n;
    return make_error("no device '", name, "' (devices: ", names, why, ")");
  }
  return make_error("no device '", name, "' (devices: ", names,
                    "; sim devices sim0, sim1, ... exist when named)");
}

const DeviceRegistry::Entry& DeviceRegistry::entry(const Device& device) const {
  for (const Entry& e : entries_) {
    if (e.device == &device) return e;
  }
  KILN_ASSERT(false, "DeviceRegistry: device '" + device.name() + "' is not one of the registry's");
  return entries_.front();
}

Backend& DeviceRegistry::backend(const Device& device) const { return *entry(device).backend; }

std::unique_ptr<Backend> DeviceRegistry::new_backend(Device& device) const {
  return entry(device).make_backend();
}

std::vector<DeviceDescription> DeviceRegistry::describe() const {
  std::vector<DeviceDescription> out;
  for (const Entry& e : entries_)
    out.push_back({e.device->name(), e.kind, e.description, e.device->memory_info()});
  return out;
}

}  // namespace kiln
