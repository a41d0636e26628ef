#include "model_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "default_model.h"
#include "messages.h"

namespace kiln::cli {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::string parse_on_off(const std::string& v, bool* out) {
  if (v == "on" || v == "1" || v == "true") *out = true;
  else if (v == "off" || v == "0" || v == "false") *out = false;
  else return "'" + v + "' is not on or off";
  return "";
}

// "DEV=GiB,DEV=GiB": each device once, GiB a finite decimal number.
std::string parse_device_gib_list(const std::string& v, std::vector<std::pair<std::string, double>>* out) {
  size_t begin = 0;
  for (;;) {
    const size_t comma = v.find(',', begin);
    const std::string item = v.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "' is not DEVICE=GiB (e.g. sim0=2)";
    const std::string name = item.substr(0, eq), gib_text = item.substr(eq + 1);
    for (const auto& [other, gib] : *out) {
      if (other == name) return "'" + name + "' is given twice";
    }
    errno = 0;
    char* end = nullptr;
    const double gib = std::strtod(gib_text.c_str(), &end);
    if (gib_text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(gib))
      return "'" + gib_text + "' is not a number of GiB";
    out->emplace_back(name, gib);
    if (comma == std::string::npos) return "";
    begin = comma + 1;
  }
}

constexpr double kBytesPerGiB = static_cast<double>(size_t{1} << 30);

std::string gib_text(double gib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", gib);
  return buf;
}

// "sim0=4,sim1=0.5": capacities in GiB, decimals allowed.
std::string parse_sim_capacities(const std::string& v, std::vector<SimDeviceOptions>* out) {
  std::vector<std::pair<std::string, double>> items;
  for (const SimDeviceOptions& o : *out) items.emplace_back(o.name, 0.0);
  if (std::string e = parse_device_gib_list(v, &items); !e.empty()) return e;
  for (size_t i = out->size(); i < items.size(); ++i) {
    const auto& [name, gib] = items[i];
    if (!is_sim_device_name(name)) return "'" + name + "' is not a sim device name (sim0, sim1, ...)";
    if (gib <= 0 || gib > 65536)
      return "the capacity of " + name + " must be in (0, 65536] GiB, not " + gib_text(gib);
    out->push_back({.name = name, .capacity = static_cast<size_t>(gib * kBytesPerGiB)});
  }
  return "";
}

// "cpu=12,sim0=0.5,sim1=-1": residency budgets in GiB; negative: all but this much.
std::string parse_budgets(const std::string& v, std::vector<DeviceBudget>* out) {
  std::vector<std::pair<std::string, double>> items;
  for (const DeviceBudget& b : *out) items.emplace_back(b.device, b.gib);
  if (std::string e = parse_device_gib_list(v, &items); !e.empty()) return e;
  for (size_t i = out->size(); i < items.size(); ++i) {
    const auto& [name, gib] = items[i];
    if (name != "cpu" && !is_sim_device_name(name) && !is_vulkan_device_name(name))
      return "'" + name + "' is not a device (cpu, vulkan0, vulkan1, ..., sim0, sim1, ...)";
    if (gib == 0 || gib < -65536 || gib > 65536)
      return "the budget of " + name + " must be in [-65536, 65536] GiB and not 0, not " + gib_text(gib);
    out->push_back({.device = name, .gib = gib});
  }
  return "";
}

// An error placing weights or a context on `device`; out of memory on a sim device says how to
// size it.
void print_placement_error(const char* command, const std::string& device, const std::string& message) {
  const bool sim = is_sim_device_name(device) && message.find("out of memory") != std::string::npos;
  print_error(command, sim ? message + " (--sim-capacity " + device + "=GiB sets its capacity)" : message);
}

}  // namespace

std::string parse_cache_type(const std::string& v, DType* out) {
  auto t = dtype_from_name(v);
  if (!t || (*t != DType::F32 && *t != DType::F16))
    return "cache type '" + v + "' is not supported (kiln's KV cache holds f32 or f16)";
  *out = *t;
  return "";
}

std::string parse_flash_attention(const std::string& v, FlashAttention* out) {
  if (v == "on" || v == "1") {
    *out = FlashAttention::On;
  } else if (v == "off" || v == "0") {
    *out = FlashAttention::Off;
  } else if (v == "auto") {
    *out = FlashAttention::Auto;
  } else {
    return "'" + v + "' is not on, off or auto";
  }
  return "";
}

void declare_threads(OptionParser& p, int32_t* out) {
  p.value({"-t", "--threads"}, out, "N", "threads (default: all cores; 0 or less: all)",
          IntRange::at_most(kMaxThreads));
}

void warn_beyond_training_context(const char* command, int64_t n_ctx_seq, const Model& model) {
  const int64_t n_ctx_train = model.hparams().n_ctx_train;
  if (n_ctx_seq <= n_ctx_train) return;
  print_warning(command, "the context of " + std::to_string(n_ctx_seq) +
                             " tokens is larger than the model's training context (" +
                             std::to_string(n_ctx_train) + "): possible training context overflow");
}

void ModelFlags::declare(OptionParser& p) {
  if (!swept) {
    if (model_list != nullptr)
      p.value({"-m", "--model"}, model_list, "FILE|NAME=PATH",
              "GGUF model (default: the model embedded in kiln); repeated NAME=PATH: serve several models");
    else
      p.value({"-m", "--model"}, &model_path, "FILE", "GGUF model (default: the model embedded in kiln)");
    declare_threads(p, &threads);
  }
  const std::string shown_default = !ctx_default.empty() ? ctx_default
                                    : context.n_ctx > 0  ? std::to_string(context.n_ctx)
                                                         : std::string("the model's, at most 4096");
  p.custom(
      {"-c", "--ctx-size"},
      [this](const std::string& v) {
        int64_t n = 0;
        std::string err = parse_integer(v, IntRange::between(0, kInt32Max), &n);
        if (err.empty()) context.n_ctx = n == 0 ? ContextOptions::kTrainingContext : n;
        ctx_given = err.empty();
        return err;
      },
      "N", "context size in tokens (default: " + shown_default + "; 0: the model's training context)");
  if (!swept) {
    p.value({"-b", "--batch-size"}, &context.n_batch, "N",
            "most tokens per decode call (default " + std::to_string(context.n_batch) + ")",
            IntRange::at_least(1));
    p.value({"-ub", "--ubatch-size"}, &context.n_ubatch, "N",
            "most tokens per micro-batch (default " + std::to_string(context.n_ubatch) + ")",
            IntRange::at_least(1));
    p.custom(
        {"-ctk", "--cache-type-k"},
        [this](const std::string& v) { return parse_cache_type(v, &context.type_k); }, "TYPE",
        "KV cache type of K: f16 (default) or f32");
    p.custom(
        {"-ctv", "--cache-type-v"},
        [this](const std::string& v) { return parse_cache_type(v, &context.type_v); }, "TYPE",
        "KV cache type of V: f16 (default) or f32");
    p.custom(
        {"-fa", "--flash-attn"},
        [this](const std::string& v) { return parse_flash_attention(v, &context.flash_attention); },
        "on|off|auto", "fused flash-attention path (default auto: on)");
  }
  declare_device(p);
  if (!swept) {
    p.custom(
        {"-ngl", "--gpu-layers", "--n-gpu-layers"},
        [this](const std::string& v) { return parse_gpu_layers(v, &split.n_gpu_layers); }, "N|auto|all",
        "layers on the --device devices, counted as llama.cpp counts them (the output layer is one; the last N of "
        "n_layer + 1 go there, the rest and the token embedding stay on the CPU); default all: the whole model");
    p.custom(
        {"-sm", "--split-mode"}, [this](const std::string& v) { return parse_split_mode(v, &split.mode); },
        "none|layer", "how layers spread over several devices: layer (default, by -ts) or none (all on -mg)");
    p.custom(
        {"-ts", "--tensor-split"}, [this](const std::string& v) { return parse_tensor_split(v, &split.tensor_split); },
        "A,B,...", "share of the layers per device, e.g. 3,1 (default: each device's free memory)");
    p.value({"-mg", "--main-gpu"}, &split.main_gpu, "N", "the device (index in --device) for -sm none");
    p.custom(
        {"-ot", "--override-tensor"}, [this](const std::string& v) { return parse_overrides(v, &split.overrides); },
        "PATTERN=DEVICE,...",
        "tensors whose name matches the regular expression go to DEVICE (cpu, CPU, sim0, vulkan0, Vulkan0), e.g. "
        "-ot 'ffn_(up|down|gate)=cpu'");
  }
  declare_memory(p);
  if (!swept) {
    p.flag({"-nkvo", "--no-kv-offload"}, &split.no_kv_offload,
           "keep every layer's K and V in host memory (the layers' attention then runs on the CPU)");
  }
  p.flag({"--segmented"}, &split.segmented,
         "stream the layers through each --device device in segments when they do not fit its room (--max-mem "
         "or free memory): each segment's weights are uploaded just before it computes, the next one's while "
         "it computes; pays for prompts, not for one-token decode");
  p.custom(
      {"--segment-prefetch"}, [this](const std::string& v) { return parse_on_off(v, &context.prefetch_segments); },
      "on|off", "with --segmented: upload the next segment while one computes (default on; off measures the overlap)");
  p.custom(
      {"-fit", "--fit"}, [this](const std::string& v) { return parse_on_off(v, &split.fit); }, "on|off",
      "when the model and its context do not fit the --device devices, choose -ngl, -ts and (without -c) a smaller "
      "context that fit (default on; only when -ngl, -ts and -ot are not given)");
  p.custom(
      {"-fitt", "--fit-target"}, [this](const std::string& v) { return parse_fit_targets(v, &split.fit_targets); },
      "MiB,...", "memory --fit leaves free per device, in --device order, the CPU last (one value: every device; "
      "default 1024)");
  p.custom(
      {"-fitc", "--fit-ctx"},
      [this](const std::string& v) { return parse_integer(v, IntRange::between(1, kInt32Max), &split.fit_min_ctx); }, "N",
      "the smallest context --fit may choose (default 4096)");
  p.custom(
      {"-fitp", "--fit-print"}, [this](const std::string& v) { return parse_on_off(v, &fit_print); }, "on|off",
      "print the memory estimate of each device (weights, KV, compute) for these flags and exit");
  declare_holding(p);
}

void ModelFlags::declare_placement(OptionParser& p) {
  declare_device(p);
  declare_memory(p);
  declare_holding(p);
}

void ModelFlags::declare_device(OptionParser& p) {
  p.custom(
      {"-dev", "--device"}, [this](const std::string& v) { return parse_device_list(v, &device, &split.devices); },
      "NAME[,NAME...]",
      "device the model runs on: cpu (default), a Vulkan GPU (vulkan0, vulkan1, ...) or a sim device (sim0, sim1, "
      "...); several split the model's layers over them (with -ts)");
}

void ModelFlags::declare_memory(OptionParser& p) {
  p.custom(
      {"--sim-capacity"}, [this](const std::string& v) { return parse_sim_capacities(v, &sim_devices); },
      "SIM=GiB,...", "capacity of sim devices, e.g. sim0=0.5 (default 4 GiB each)");
  p.path({"--sim-shared"}, &sim_shared_dir, "DIR",
          "share each sim device's capacity with the processes that name the same DIR, like a real "
          "GPU's memory (a ledger file there; give every process the same --sim-capacity)");
  p.custom(
      {"--max-mem"}, [this](const std::string& v) { return parse_budgets(v, &budgets); }, "DEV=GiB,...",
      "memory budget per device, e.g. cpu=12,sim0=0.5 (negative: all but this much); the residency "
      "manager evicts idle models to stay within it");
  p.path({"--swap-dir"}, &swap_dir, "DIR",
          "an evicted model's KV cache goes to a file in DIR (unnamed, mode 0600, gone at restore) instead "
          "of host memory; on the CPU the KV cache is then evictable too");
}

void ModelFlags::declare_holding(OptionParser& p) {
  p.flag({"--no-mmap"}, &no_mmap,
         "copy the weights into memory of their own instead of reading them from the mapped file: "
         "eviction frees that memory, restoring reads the file again");
  p.flag({"--mlock"}, &mlock, "lock the weights in RAM (never swapped out) while they are resident");
  p.flag({"--list-devices"}, &list_devices, "print the devices (name, kind, capacity, free memory) and exit");
}

DeviceRegistryOptions ModelFlags::device_options() const {
  DeviceRegistryOptions o{.n_threads = threads,
                          .sim = sim_devices,
                          .budgets = budgets,
                          .sim_shared_dir = sim_shared_dir,
                          .swap_dir = swap_dir};
  auto name = [&](const std::string& dev) {
    if (is_vulkan_device_name(dev)) {
      o.vulkan = true;
      return;
    }
    bool named = dev == "cpu";
    for (const SimDeviceOptions& s : o.sim) named = named || s.name == dev;
    if (!named) o.sim.push_back({.name = dev, .capacity = kDefaultSimCapacity});
  };
  name(device);
  for (const std::string& d : split.devices) name(d);
  for (const auto& [pattern, d] : split.overrides) name(d);
  for (const DeviceBudget& b : budgets) name(b.device);
  o.vulkan = o.vulkan || list_devices;
  return o;
}

WeightOptions ModelFlags::weight_options(const char* command) const {
  WeightOptions o{.copy_all = no_mmap, .lock = mlock, .on_lock_failure = {}, .prepare_threads = threads};
  if (mlock) o.on_lock_failure = [command](const std::string& message) { print_warning(command, message); };
  return o;
}

std::optional<int> ModelFlags::list_devices_if_asked(const char* command) const {
  if (!list_devices) return std::nullopt;
  auto devices = DeviceRegistry::create(device_options());
  if (!devices.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, devices.error().message.c_str());
    return 1;
  }
  constexpr size_t kMiB = size_t{1} << 20;
  std::printf("Available devices:\n");
  for (const DeviceDescription& d : (*devices)->describe()) {
    std::printf("  %s: %s, %s (%zu MiB, %zu MiB free)\n", d.name.c_str(), d.kind.c_str(),
                d.description.c_str(), d.memory.total / kMiB, d.memory.free / kMiB);
  }
  for (const std::string& note : (*devices)->notes()) std::printf("  (%s)\n", note.c_str());
  return 0;
}

std::shared_ptr<const Model> ModelFlags::load_model(const char* command) const {
  auto m = model_path.empty() ? load_default_model() : Model::load(model_path);
  if (!m.ok()) {
    print_error(command, m.error().message);
    return nullptr;
  }
  return *m;
}

std::optional<ModelContext> ModelFlags::create_context(const char* command,
                                                       std::shared_ptr<const Model> model,
                                                       const ContextOptions& options) const {
  auto fail = [&](const std::string& message) -> std::optional<ModelContext> {
    print_placement_error(command, device, message);
    return std::nullopt;
  };
  ModelContext mc;
  auto devices = DeviceRegistry::create(device_options());
  if (!devices.ok()) return fail(devices.error().message);
  mc.devices = std::move(*devices);
  auto plan = plan_placement(split, device, *mc.devices, *model, options, weight_options(command), ctx_given);
  if (!plan.ok()) return fail(plan.error().message);
  if (!plan->fit_summary.empty()) std::fprintf(stderr, "kiln %s: %s\n", command, plan->fit_summary.c_str());
  auto placed = place_model(model, *plan, device, *mc.devices, weight_options(command));
  if (!placed.ok()) return fail(placed.error().message);
  if (!placed->layers.empty()) std::fprintf(stderr, "kiln %s: %s\n", command, placed->layers.c_str());
  mc.weights = placed->weights.front();
  if (placed->weights.size() > 1) mc.split = std::move(placed->weights);
  const ContextOptions& co = plan->context;
  if (!replace_context(command, mc, co)) return std::nullopt;
  return mc;
}

std::optional<int> ModelFlags::fit_print_if_asked(const char* command, const std::shared_ptr<const Model>& model) const {
  if (!fit_print) return std::nullopt;
  auto fail = [&](const std::string& message) {
    print_error(command, message);
    return 1;
  };
  auto devices = DeviceRegistry::create(device_options());
  if (!devices.ok()) return fail(devices.error().message);
  auto plan = plan_placement(split, device, **devices, *model, context, weight_options(command), ctx_given);
  if (!plan.ok()) return fail(plan.error().message);
  if (!plan->fit_summary.empty()) std::printf("%s\n", plan->fit_summary.c_str());
  auto est = estimate_plan(*model, *plan, device, **devices, weight_options(command));
  if (!est.ok()) return fail(est.error().message);
  std::printf("%s", describe_estimate(*est).c_str());
  return 0;
}

bool ModelFlags::replace_context(const char* command, ModelContext& mc, const ContextOptions& options) const {
  mc.context.reset();
  auto ctx = create_placed_context(mc.split.empty() ? std::vector{mc.weights} : mc.split, *mc.devices, options);
  if (!ctx.ok()) {
    print_placement_error(command, device, ctx.error().message);
    return false;
  }
  mc.context = std::move(*ctx);
  warn_beyond_training_context(command, mc.context->n_ctx(), mc.weights->model());
  return true;
}

}  // namespace kiln::cli
