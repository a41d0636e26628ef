// Options shared by the subcommands that run a model (run, chat, perplexity, bench, serve): model
// path, threads, context and batch sizes, KV cache types, the attention path, and the device the
// model runs on (--device, --sim-capacity, --list-devices), with llama.cpp's flag names and
// meanings (-t 0 or less: all cores; -c 0: the model's whole training context). The model
// defaults to the one embedded in the kiln binary.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "llm/model_placement.h"
#include "llm/context.h"
#include "llm/model.h"
#include "options.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::cli {

// What run, chat, perplexity and bench compute with: the process's devices, the model's weights
// on the device --device names, and a context planning in that device's compute arena
// (DeviceRegistry::arena; members are destroyed context first). The vision and audio encoders made
// for the context and a draft model plan in the same arena (media_flags.h: encoder_options), so the
// arena fits the largest of their worst cases.
struct ModelContext {
  std::unique_ptr<DeviceRegistry> devices;
  // The weights on the model's main device: the --device one, or the first device of a split.
  std::shared_ptr<DeviceWeights> weights;
  // A model split over devices (-ngl, -ts, -ot, several --device): every device's weights, the
  // main one first; empty when the model lies on one device.
  std::vector<std::shared_ptr<DeviceWeights>> split;
  std::unique_ptr<Context> context;
  // The backend `context` runs on (the registry's, for the weights' device).
  Backend& backend() const { return devices->backend(weights->device()); }
  // The compute arena `context` plans in (the device's).
  ComputeArena& arena() const { return devices->arena(weights->device()); }
};

constexpr int64_t kMaxThreads = 512;  // as ggml's GGML_MAX_N_THREADS

// -ctk/-ctv and -fa values: the error message naming the value, or "".
std::string parse_cache_type(const std::string& v, DType* out);
std::string parse_flash_attention(const std::string& v, FlashAttention* out);

// Declares -t/--threads on `p`, writing `out` (0 or less: every hardware thread, as llama.cpp).
void declare_threads(OptionParser& p, int32_t* out);

// Warns (as llama.cpp does) when a sequence may reach positions beyond the model's training
// context: `n_ctx_seq` is the most tokens one sequence can hold.
void warn_beyond_training_context(const char* command, int64_t n_ctx_seq, const Model& model);

struct ModelFlags {
  std::string model_path;  // empty: the embedded default model
  // Set before declare() (kiln serve): -m repeats, each value appended here instead of model_path.
  std::vector<std::string>* model_list = nullptr;
  int32_t threads = 0;     // 0 or less: every hardware thread
  // context.n_ctx as set before declare() is the command's default and is shown in the help, or
  // ctx_default when the command decides later.
  ContextOptions context;
  std::string device = "cpu";                 // --device: where the model runs (the first named)
  SplitFlags split;                           // --device A,B, -ngl, -sm, -ts, -mg, -ot, -fit, -fitt, -fitc
  bool fit_print = false;                     // -fitp
  bool ctx_given = false;           // -c was given (fit keeps it)
  std::vector<SimDeviceOptions> sim_devices;  // --sim-capacity, in the order named
  std::vector<DeviceBudget> budgets;          // --max-mem
  std::string sim_shared_dir;                 // --sim-shared
  std::string swap_dir;                       // --swap-dir
  bool no_mmap = false;                       // --no-mmap
  bool mlock = false;                         // --mlock
  bool list_devices = false;                  // --list-devices
  std::string ctx_default;
  // Set before declare() (kiln bench): -m, -t, -b, -ub, -ctk, -ctv, -fa, -ngl, -sm, -mg, -ts, -ot and
  // -nkvo are left to the command, which takes lists of them (bench_sweep.h).
  bool swept = false;

  // Declares -m, -t, -c, -b, -ub, -ctk, -ctv, -fa (not the `swept` ones), --device, -ngl, -sm,
  // -ts, -mg, -ot, --sim-capacity, --sim-shared, --max-mem, --swap-dir, --no-mmap, --mlock,
  // --list-devices on `p`.
  void declare(OptionParser& p);
  // Declares only the placement flags: --device, --sim-capacity, --sim-shared, --max-mem,
  // --swap-dir, --no-mmap, --mlock, --list-devices (kiln image, whose networks are not split).
  void declare_placement(OptionParser& p);
  // With --list-devices: prints every device (name, kind, capacity, free memory) to stdout and
  // returns the exit code; else nullopt.
  std::optional<int> list_devices_if_asked(const char* command) const;
  // The devices these flags name: the CPU, and sim devices named by --sim-capacity, --device or
  // --max-mem (4 GiB unless --sim-capacity sizes them), with the --max-mem budgets,
  // --sim-shared and --swap-dir.
  DeviceRegistryOptions device_options() const;
  // How the weights are held (--no-mmap, --mlock; a failed lock is a warning of `command`).
  WeightOptions weight_options(const char* command) const;
  // Loads the model named by -m (or the embedded default); prints the error and returns null.
  std::shared_ptr<const Model> load_model(const char* command) const;
  // With -fitp on: prints the placement fit chooses (or the flags give) and each device's estimate
  // (llm/placement_fit.h) to stdout and returns the exit code; else nullopt.
  std::optional<int> fit_print_if_asked(const char* command, const std::shared_ptr<const Model>& model) const;
  // Opens the devices, places `model` on the --device one (or over the split's devices, printing
  // where the layers went) and creates a context with `options`
  // in that device's compute arena (options.arena is replaced; warning when the context is larger
  // than the model's training context); prints the error ("kiln COMMAND: ...") and returns
  // nullopt.
  std::optional<ModelContext> create_context(const char* command, std::shared_ptr<const Model> model,
                                             const ContextOptions& options) const;
  // Replaces mc.context by a new one with `options` on the same weights and devices (the old one
  // is destroyed first, so the arena's room is free); prints the error and returns false.
  bool replace_context(const char* command, ModelContext& mc, const ContextOptions& options) const;

 private:
  void declare_device(OptionParser& p);   // -dev
  void declare_memory(OptionParser& p);   // --sim-capacity, --sim-shared, --max-mem, --swap-dir
  void declare_holding(OptionParser& p);  // --no-mmap, --mlock, --list-devices
};

}  // namespace kiln::cli
