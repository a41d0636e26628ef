// kiln.h: versions, runtime (devices, budgets, memory breakdown) over backends/device_registry.h.
#include <algorithm>
#include <cstring>

#include "api/handles.h"
#include "runtime/memory_breakdown.h"

using namespace kiln;
using namespace kiln::api;

namespace {

// Copies `s` into a fixed char array, truncated, NUL-terminated.
template <size_t N>
void copy_name(char (&out)[N], std::string_view s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

Result<DeviceRegistryOptions> registry_options(const kiln_runtime_options& o) {
  if (o.n_sim_devices < 0) return make_error("n_sim_devices is negative (", o.n_sim_devices, ")");
  if (o.n_budgets < 0) return make_error("n_budgets is negative (", o.n_budgets, ")");
  if (o.n_sim_devices > 0 && o.sim_devices == nullptr) return make_error("sim_devices is NULL");
  if (o.n_budgets > 0 && o.budgets == nullptr) return make_error("budgets is NULL");
  DeviceRegistryOptions r;
  r.n_threads = std::max(o.n_threads, 0);
  r.vulkan = o.vulkan != 0;
  for (int64_t i = 0; i < o.n_sim_devices; ++i) {
    const kiln_sim_device& s = o.sim_devices[i];
    if (s.name == nullptr) return make_error("sim_devices[", i, "].name is NULL");
    r.sim.push_back({.name = s.name, .capacity = static_cast<size_t>(s.capacity)});
  }
  for (int64_t i = 0; i < o.n_budgets; ++i) {
    const kiln_budget& b = o.budgets[i];
    if (b.device == nullptr) return make_error("budgets[", i, "].device is NULL");
    r.budgets.push_back({.device = b.device, .gib = b.gib});
  }
  if (o.swap_dir != nullptr) r.swap_dir = o.swap_dir;
  return r;
}

}  // namespace

extern "C" {

const char* kiln_version(void) { return "0.1.0"; }

int32_t kiln_api_version(void) { return KILN_API_VERSION; }

kiln_status kiln_runtime_default_options(kiln_runtime_options* options) {
  constexpr std::string_view fn = "kiln_runtime_default_options";
  KILN_API_TRY(check_pointer(fn, "options", options));
  *options = kiln_runtime_options{};
  return KILN_OK;
}

kiln_status kiln_runtime_create(const kiln_runtime_options* options, kiln_runtime** out) {
  constexpr std::string_view fn = "kiln_runtime_create";
  return api_call(fn, [&] {
    KILN_API_TRY(check_pointer(fn, "out", out));
    const kiln_runtime_options defaults{};
    auto opts = registry_options(options != nullptr ? *options : defaults);
    if (!opts.ok()) return bad_argument(fn, opts.error().message);
    auto devices = DeviceRegistry::create(*opts);
    if (!devices.ok()) return from_status(fn, devices.error());
    auto rt = std::make_unique<kiln_runtime>();
    rt->devices = std::move(*devices);
    if (options != nullptr)
      KILN_API_TRY(open_arbiter(fn, *rt, options->arbiter_dir, options->arbiter_timeout_ms));
    *out = rt.release();
    register_handle(*out);
    return KILN_OK;
  });
}

kiln_status kiln_runtime_free(kiln_runtime* runtime) {
  constexpr std::string_view fn = "kiln_runtime_free";
  KILN_API_TRY(check_handle(fn, "runtime", runtime));
  if (runtime->users > 0)
    return bad_argument(fn,
                        std::to_string(runtime->users.load()) + " model(s) of the runtime are still alive");
  unregister_handle(runtime);
  delete runtime;
  return KILN_OK;
}

kiln_status kiln_runtime_device_count(const kiln_runtime* runtime, int64_t* count) {
  constexpr std::string_view fn = "kiln_runtime_device_count";
  KILN_API_TRY(check_handle(fn, "runtime", runtime));
  KILN_API_TRY(check_pointer(fn, "count", count));
  return api_call(fn, [&] {
    *count = static_cast<int64_t>(runtime->devices->describe().size());
    return KILN_OK;
  });
}

kiln_status kiln_runtime_device_info(const kiln_runtime* runtime, int64_t index, kiln_device_info* info) {
  constexpr std::string_view fn = "kiln_runtime_device_info";
  KILN_API_TRY(check_handle(fn, "runtime", runtime));
  KILN_API_TRY(check_pointer(fn, "info", info));
  return api_call(fn, [&] {
    const std::vector<DeviceDescription> all = runtime->devices->describe();
    if (index < 0 || index >= static_cast<int64_t>(all.size()))
      return bad_argument(fn, "index " + std::to_string(index) + " is outside the " +
                                  std::to_string(all.size()) + " devices");
    const DeviceDescription& d = all[static_cast<size_t>(index)];
    *info = kiln_device_info{};
    copy_name(info->name, d.name);
    copy_name(info->kind, d.kind);
    copy_name(info->description, d.description);
    info->total = d.memory.total;
    info->free = d.memory.free;
    return KILN_OK;
  });
}

kiln_status kiln_runtime_memory(const kiln_runtime* runtime, kiln_memory_row* rows, int64_t capacity,
                                int64_t* n_rows) {
  constexpr std::string_view fn = "kiln_runtime_memory";
  KILN_API_TRY(check_handle(fn, "runtime", runtime));
  KILN_API_TRY(check_size(fn, "capacity", capacity));
  KILN_API_TRY(check_pointer(fn, "n_rows", n_rows));
  if (capacity > 0) KILN_API_TRY(check_pointer(fn, "rows", rows));
  return api_call(fn, [&] {
    std::vector<kiln_memory_row> out;
    for (const DeviceMemoryBreakdown& d : runtime->devices->memory_breakdown()) {
      kiln_memory_row dev{};
      copy_name(dev.device, d.device);
      dev.total = d.total;
      dev.free = d.free;
      dev.budget = d.budget == kNoBudget ? UINT64_MAX : d.budget;
      dev.counted = d.counted;
      out.push_back(dev);
      for (const OwnerMemory& o : d.owners) {
        kiln_memory_row row{};
        copy_name(row.device, d.device);
        copy_name(row.owner, o.name);
        row.weights = o.bytes[static_cast<size_t>(MemoryKind::Weights)];
        row.kv = o.bytes[static_cast<size_t>(MemoryKind::Kv)];
        row.compute = o.bytes[static_cast<size_t>(MemoryKind::Compute)];
        row.scratch = o.bytes[static_cast<size_t>(MemoryKind::Scratch)];
        row.evicted = static_cast<int64_t>(o.evicted_residents);
        row.pinned = o.pinned ? 1 : 0;
        out.push_back(row);
      }
    }
    std::copy_n(out.begin(), std::min<int64_t>(capacity, static_cast<int64_t>(out.size())), rows);
    *n_rows = static_cast<int64_t>(out.size());
    return KILN_OK;
  });
}

}  // extern "C"
