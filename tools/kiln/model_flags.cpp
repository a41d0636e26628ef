#include "model_flags.h"

#include <cstdio>

#include "default_model.h"

namespace kiln::cli {
namespace {

std::string parse_cache_type(const std::string& v, DType* out) {
  auto t = dtype_from_name(v);
  if (!t || (*t != DType::F32 && *t != DType::F16)) return "cache type '" + v + "' is not supported (f32, f16)";
  *out = *t;
  return "";
}

}  // namespace

void ModelFlags::declare(OptionParser& p) {
  p.value({"-m", "--model"}, &model_path, "FILE", "GGUF model (default: the model embedded in kiln)");
  p.value({"-t", "--threads"}, &threads, "N", "threads (default: all)");
  p.value({"-c", "--ctx-size"}, &context.n_ctx, "N", "context size in tokens (default: the model's, at most 4096)");
  p.value({"-b", "--batch-size"}, &context.n_batch, "N", "most tokens per decode call (default 2048)");
  p.value({"-ub", "--ubatch-size"}, &context.n_ubatch, "N", "most tokens per micro-batch (default 512)");
  p.custom({"-ctk", "--cache-type-k"}, [this](const std::string& v) { return parse_cache_type(v, &context.type_k); },
           "TYPE", "KV cache type of K: f16 (default) or f32");
  p.custom({"-ctv", "--cache-type-v"}, [this](const std::string& v) { return parse_cache_type(v, &context.type_v); },
           "TYPE", "KV cache type of V: f16 (default) or f32");
  p.custom({"-fa", "--flash-attn"}, [this](const std::string& v) -> std::string {
    if (v == "on") {
      context.flash_attention = FlashAttention::On;
    } else if (v == "off") {
      context.flash_attention = FlashAttention::Off;
    } else if (v == "auto") {
      context.flash_attention = FlashAttention::Auto;
    } else {
      return "'" + v + "' is not on, off or auto";
    }
    return "";
  }, "on|off|auto", "fused flash-attention path (default auto: on)");
}

std::shared_ptr<const Model> ModelFlags::load_model(const char* command) const {
  auto m = model_path.empty() ? load_default_model() : Model::load(model_path);
  if (!m.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, m.error().message.c_str());
    return nullptr;
  }
  return *m;
}

}  // namespace kiln::cli
