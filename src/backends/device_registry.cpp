#include "backends/device_registry.h"

#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"

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

Result<std::unique_ptr<DeviceRegistry>> DeviceRegistry::create(const DeviceRegistryOptions& options) {
  std::unique_ptr<DeviceRegistry> r(new DeviceRegistry());
  r->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  r->cpu_ = std::make_unique<CpuDevice>();
  CpuDevice* cpu = r->cpu_.get();
  ThreadPool* pool = r->pool_.get();
  r->entries_.push_back(
      {cpu, "cpu", "host RAM", [cpu, pool] { return std::make_unique<CpuBackend>(*cpu, *pool); }, {}});
  for (const SimDeviceOptions& so : options.sim) {
    if (!is_sim_device_name(so.name))
      return make_error("device '", so.name, "': sim devices are named sim0, sim1, ...");
    for (const auto& s : r->sims_) {
      if (s->name() == so.name) return make_error("device '", so.name, "' is given twice");
    }
    KILN_ASSIGN_OR_RETURN(auto sim, SimDevice::create(so));
    SimDevice* dev = sim.get();
    r->sims_.push_back(std::move(sim));
    r->entries_.push_back({dev,
                           "sim",
                           "simulated accelerator, not host-visible",
                           [dev, pool] { return std::make_unique<SimBackend>(*dev, *pool); },
                           {}});
  }
  for (Entry& e : r->entries_) e.backend = e.make_backend();
  return r;
}

DeviceRegistry::~DeviceRegistry() = default;

Result<Device*> DeviceRegistry::find(std::string_view name) const {
  if (name == "none") return static_cast<Device*>(cpu_.get());
  std::string names;
  for (const Entry& e : entries_) {
    if (e.device->name() == name) return e.device;
    names += (names.empty() ? "" : ", ") + e.device->name();
  }
  if (is_sim_device_name(name))
    return make_error("device '", name, "' does not exist here (devices: ", names,
                      "); name it to --sim-capacity");
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
