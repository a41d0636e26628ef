#include "model_flags.h"

#include <limits>

#include "default_model.h"
#include "messages.h"

namespace kiln::cli {
namespace {

constexpr int64_t kMaxThreads = 512;  // as ggml's GGML_MAX_N_THREADS
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::string parse_cache_type(const std::string& v, DType* out) {
  auto t = dtype_from_name(v);
  if (!t || (*t != DType::F32 && *t != DType::F16)) return "cache type '" + v + "' is not supported (f32, f16)";
  *out = *t;
  return "";
}

}  // namespace

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
  p.value({"-m", "--model"}, &model_path, "FILE", "GGUF model (default: the model embedded in kiln)");
  declare_threads(p, &threads);
  const std::string shown_default = !ctx_default.empty() ? ctx_default
                                    : context.n_ctx > 0  ? std::to_string(context.n_ctx)
                                                         : std::string("the model's, at most 4096");
  p.custom(
      {"-c", "--ctx-size"},
      [this](const std::string& v) {
        int64_t n = 0;
        std::string err = parse_integer(v, IntRange::between(0, kInt32Max), &n);
        if (err.empty()) context.n_ctx = n == 0 ? ContextOptions::kTrainingContext : n;
        return err;
      },
      "N", "context size in tokens (default: " + shown_default + "; 0: the model's training context)");
  p.value({"-b", "--batch-size"}, &context.n_batch, "N",
          "most tokens per decode call (default " + std::to_string(context.n_batch) + ")",
          IntRange::at_least(1));
  p.value({"-ub", "--ubatch-size"}, &context.n_ubatch, "N",
          "most tokens per micro-batch (default " + std::to_string(context.n_ubatch) + ")",
          IntRange::at_least(1));
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
    print_error(command, m.error().message);
    return nullptr;
  }
  return *m;
}

std::unique_ptr<Context> ModelFlags::create_context(const char* command, std::shared_ptr<const Model> model,
                                                    Backend& backend) const {
  const Model& m = *model;
  auto ctx = Context::create(std::move(model), backend, context);
  if (!ctx.ok()) {
    print_error(command, ctx.error().message);
    return nullptr;
  }
  warn_beyond_training_context(command, (*ctx)->n_ctx(), m);
  return std::move(*ctx);
}

}  // namespace kiln::cli
