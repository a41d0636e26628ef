#include "serve/model_catalog.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/gguf.h"
#include "core/safetensors.h"
#include "models/sd/unet.h"

namespace kiln::serve {
namespace {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

struct PresetValue {
  std::string value;
  int line = 0;
};
using Section = std::vector<std::pair<std::string, PresetValue>>;  // key, value in file order

const char* const kHonoured =
    "model (m), ctx-size (c), parallel (np), kv-unified (kvu), kv-unified-per-slot, load-on-startup, "
    "sleep-idle-seconds, pin, n-gpu-layers (ngl), split-mode (sm), tensor-split (ts), main-gpu (mg), "
    "override-tensor (ot), fit, segmented, mmproj; for an image model diffusion-model, clip_l, vae, taesd";

// The preset key's canonical name; empty for a key kiln does not honour.
std::string canonical_key(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"model", "model"},
      {"m", "model"},
      {"LLAMA_ARG_MODEL", "model"},
      {"ctx-size", "ctx-size"},
      {"c", "ctx-size"},
      {"LLAMA_ARG_CTX_SIZE", "ctx-size"},
      {"parallel", "parallel"},
      {"np", "parallel"},
      {"LLAMA_ARG_N_PARALLEL", "parallel"},
      {"kv-unified", "kv-unified"},
      {"kvu", "kv-unified"},
      {"LLAMA_ARG_KV_UNIFIED", "kv-unified"},
      {"kv-unified-per-slot", "kv-unified-per-slot"},
      {"LLAMA_ARG_KV_UNIFIED_PER_SLOT", "kv-unified-per-slot"},
      {"load-on-startup", "load-on-startup"},
      {"sleep-idle-seconds", "sleep-idle-seconds"},
      {"pin", "pin"},
      {"n-gpu-layers", "n-gpu-layers"},
      {"gpu-layers", "n-gpu-layers"},
      {"ngl", "n-gpu-layers"},
      {"LLAMA_ARG_N_GPU_LAYERS", "n-gpu-layers"},
      {"split-mode", "split-mode"},
      {"sm", "split-mode"},
      {"LLAMA_ARG_SPLIT_MODE", "split-mode"},
      {"tensor-split", "tensor-split"},
      {"ts", "tensor-split"},
      {"LLAMA_ARG_TENSOR_SPLIT", "tensor-split"},
      {"main-gpu", "main-gpu"},
      {"mg", "main-gpu"},
      {"LLAMA_ARG_MAIN_GPU", "main-gpu"},
      {"mmproj", "mmproj"},
      {"LLAMA_ARG_MMPROJ", "mmproj"},
      {"override-tensor", "override-tensor"},
      {"ot", "override-tensor"},
      {"LLAMA_ARG_OVERRIDE_TENSOR", "override-tensor"},
      {"fit", "fit"},
      {"LLAMA_ARG_FIT", "fit"},
      {"segmented", "segmented"},
      {"diffusion-model", "diffusion-model"},
      {"clip_l", "clip_l"},
      {"vae", "vae"},
      {"taesd", "taesd"}};
  auto it = names.find(key);
  return it == names.end() ? std::string() : it->second;
}

Result<int64_t> to_integer(const std::string& v, int64_t lo, int64_t hi) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return make_error("'", v, "' is not an integer");
  if (n < lo || n > hi) return make_error(v, " is outside ", lo, "..", hi);
  return n;
}

Result<bool> to_bool(const std::string& v) {
  if (v == "true" || v == "1" || v == "on" || v == "enabled") return true;
  if (v == "false" || v == "0" || v == "off" || v == "disabled") return false;
  return make_error("'", v, "' is not a boolean (true or false)");
}

// Sets one preset key on `spec`.
Status apply_key(const std::string& key, const std::string& value, ModelSpec& spec) {
  if (key == "model") {
    spec.path = value;
  } else if (key == "mmproj") {
    spec.mmproj = value;
  } else if (key == "diffusion-model" || key == "clip_l" || key == "vae" || key == "taesd") {
    std::string& part = key == "diffusion-model" ? spec.diffusion_model
                        : key == "clip_l"        ? spec.clip_l
                        : key == "vae"           ? spec.vae
                                                 : spec.taesd;
    part = value;
    spec.kind = ModelKind::Image;
  } else if (key == "ctx-size") {
    KILN_ASSIGN_OR_RETURN(int64_t n, to_integer(value, 0, int64_t{1} << 31));
    spec.n_ctx = n == 0 ? ContextOptions::kTrainingContext : n;  // llama.cpp's -c 0
  } else if (key == "parallel") {
    KILN_ASSIGN_OR_RETURN(int64_t n, to_integer(value, -1, kMaxSequences));
    if (n == 0) return make_error("0 is not a slot count (-1: auto)");
    spec.n_parallel = static_cast<int32_t>(n);  // -1: ServerOptions::kParallelAuto
  } else if (key == "kv-unified") {
    KILN_ASSIGN_OR_RETURN(spec.kv_unified, to_bool(value));
  } else if (key == "kv-unified-per-slot") {
    KILN_ASSIGN_OR_RETURN(int64_t n, to_integer(value, 1, int64_t{1} << 31));
    spec.kv_unified_per_slot = static_cast<int32_t>(n);
  } else if (key == "load-on-startup") {
    KILN_ASSIGN_OR_RETURN(spec.load_on_startup, to_bool(value));
  } else if (key == "n-gpu-layers") {
    int64_t n = 0;
    if (std::string e = parse_gpu_layers(value, &n); !e.empty()) return make_error(e);
    spec.n_gpu_layers = n;
  } else if (key == "split-mode") {
    SplitMode m = SplitMode::Layer;
    if (std::string e = parse_split_mode(value, &m); !e.empty()) return make_error(e);
    spec.split_mode = m;
  } else if (key == "tensor-split") {
    std::vector<float> ts;
    if (std::string e = parse_tensor_split(value, &ts); !e.empty()) return make_error(e);
    spec.tensor_split = std::move(ts);
  } else if (key == "main-gpu") {
    KILN_ASSIGN_OR_RETURN(int64_t n, to_integer(value, 0, 64));
    spec.main_gpu = static_cast<int32_t>(n);
  } else if (key == "override-tensor") {
    std::vector<std::pair<std::string, std::string>> ot;
    if (std::string e = parse_overrides(value, &ot); !e.empty()) return make_error(e);
    spec.overrides = std::move(ot);
  } else if (key == "fit") {
    KILN_ASSIGN_OR_RETURN(bool on, to_bool(value));
    spec.fit = on;
  } else if (key == "segmented") {
    KILN_ASSIGN_OR_RETURN(bool on, to_bool(value));
    spec.segmented = on;
  } else if (key == "sleep-idle-seconds") {
    KILN_ASSIGN_OR_RETURN(int64_t n, to_integer(value, -1, int64_t{1} << 30));
    spec.sleep_idle_seconds = static_cast<int32_t>(std::max<int64_t>(n, 0));
  } else {
    KILN_ASSIGN_OR_RETURN(spec.pin, to_bool(value));
  }
  return {};
}

Status apply_section(const Section& section, const std::string& file, ModelSpec& spec) {
  for (const auto& [key, v] : section) {
    if (auto st = apply_key(key, v.value, spec); !st.ok())
      return make_error(file, ":", v.line, ": ", key, ": ", st.error().message);
  }
  return {};
}

}  // namespace

Result<ModelSpec> parse_model_flag(const std::string& value) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    return make_error("'", value, "' is not NAME=PATH (a server of several models names each one)");
  ModelSpec spec;
  spec.name = value.substr(0, eq);
  spec.path = value.substr(eq + 1);
  return spec;
}

Result<std::vector<ModelSpec>> models_in_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return make_error("--models-dir ", dir, ": ", ec.message());
  std::vector<ModelSpec> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return make_error("--models-dir ", dir, ": ", ec.message());
    const fs::path& p = it->path();
    if (p.extension() != ".gguf" || !it->is_regular_file(ec)) continue;
    ModelSpec spec;
    spec.name = p.stem().string();
    spec.path = p.string();
    out.push_back(std::move(spec));
  }
  std::sort(out.begin(), out.end(), [](const ModelSpec& a, const ModelSpec& b) { return a.name < b.name; });
  return out;
}

Status apply_models_preset(const std::string& text, const std::string& file, std::vector<ModelSpec>& models) {
  Section global;
  std::vector<std::pair<std::string, Section>> sections;  // in file order
  constexpr int kNone = -2, kGlobal = -1;
  int current = kNone;  // the section lines go to: kGlobal, or an index of `sections`
  std::istringstream in(text);
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    if (raw.find('\0') != std::string::npos) return make_error(file, ":", line, ": a NUL byte (a preset file is text)");
    const std::string s = trim(raw);
    if (s.empty() || s[0] == ';' || s[0] == '#') continue;
    if (s[0] == '[') {
      if (s.back() != ']' || s.size() < 3) return make_error(file, ":", line, ": a section header is [NAME]");
      const std::string name = trim(std::string_view(s).substr(1, s.size() - 2));
      if (name == "*") {
        current = kGlobal;
        continue;
      }
      if (std::any_of(sections.begin(), sections.end(), [&](const auto& x) { return x.first == name; }))
        return make_error(file, ":", line, ": section [", name, "] appears twice");
      sections.push_back({name, {}});
      current = static_cast<int>(sections.size()) - 1;
      continue;
    }
    const size_t eq = s.find('=');
    if (eq == std::string::npos) return make_error(file, ":", line, ": expected key = value");
    const std::string key = trim(std::string_view(s).substr(0, eq));
    const std::string value = trim(std::string_view(s).substr(eq + 1));
    if (current == kNone) {
      if (key == "version" && value == "1") continue;  // llama-server's format version
      if (key == "version") return make_error(file, ":", line, ": version ", value, " (kiln reads version = 1)");
      return make_error(file, ":", line, ": '", key, "' outside a section (only version = 1 may be there)");
    }
    const std::string canonical = canonical_key(key);
    if (canonical.empty())
      return make_error(file, ":", line, ": key '", key, "' is not supported by kiln (it honours: ", kHonoured,
                        ")");
    if (current == kGlobal && canonical == "model")
      return make_error(file, ":", line, ": [*] applies to every model and cannot name a model file");
    Section& target = current == kGlobal ? global : sections[static_cast<size_t>(current)].second;
    target.push_back({canonical, {value, line}});
  }
  for (ModelSpec& spec : models) KILN_TRY(apply_section(global, file, spec));
  for (const auto& [name, section] : sections) {
    auto it = std::find_if(models.begin(), models.end(), [&](const ModelSpec& m) { return m.name == name; });
    if (it == models.end()) {
      ModelSpec spec;
      spec.name = name;
      KILN_TRY(apply_section(global, file, spec));
      models.push_back(std::move(spec));
      it = models.end() - 1;
    }
    KILN_TRY(apply_section(section, file, *it));
    if (it->path.empty() && it->diffusion_model.empty())
      return make_error(file, ": section [", name,
                        "] names no model of -m or --models-dir and sets no 'model' (or 'diffusion-model') path");
  }
  return {};
}

const char* model_kind_name(ModelKind kind) { return kind == ModelKind::Image ? "image" : "text"; }

namespace {

// Whether the file at `path` holds a Stable Diffusion UNet under stable-diffusion.cpp's names (a
// single-file checkpoint, .safetensors or GGUF). Reads the headers only: the file is mapped, its
// tensors are neither read nor packed (sd::SdWeightFile would copy a .safetensors whole).
bool holds_sd_unet(const std::string& path) {
  const std::string probe = std::string(sd::kSdUnetPrefix) + ".input_blocks.0.0.weight";
  if (auto gguf = GgufFile::open(path); gguf.ok()) return (*gguf)->find_tensor(probe) != nullptr;
  if (auto st = SafetensorsFile::open(path); st.ok()) return (*st)->find(probe) != nullptr;
  return false;
}

}  // namespace

void classify_models(std::vector<ModelSpec>& models) {
  for (ModelSpec& m : models) {
    if (m.kind == ModelKind::Image || m.path.empty()) continue;
    if (holds_sd_unet(m.path)) m.kind = ModelKind::Image;
  }
}

Status check_models(const std::vector<ModelSpec>& models) {
  if (models.empty()) return make_error("no models: -m NAME=PATH, --models-dir and --models-preset named none");
  std::set<std::string> seen;
  for (const ModelSpec& m : models)
    if (!seen.insert(m.name).second) return make_error("two models are named '", m.name, "'");
  return {};
}

}  // namespace kiln::serve
