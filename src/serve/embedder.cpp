#include "serve/embedder.h"

#include <algorithm>

namespace kiln::serve {

Result<Pooling> server_pooling(const ServerOptions& options, const Model& model) {
  KILN_TRY(check_embedding_model(model));
  if (options.pooling.empty()) return model_pooling(model);
  auto p = parse_pooling(options.pooling);
  if (!p.ok()) return make_error("--pooling: ", p.error().message);
  return p;
}

Result<std::vector<std::vector<float>>> Embedder::embed(const ServerState& st,
                                                        std::span<const std::vector<int32_t>> inputs,
                                                        Pooling pooling, const ContextOptions& base) {
  std::lock_guard lock(mutex_);
  size_t longest = 0;
  for (const auto& in : inputs) longest = std::max(longest, in.size());
  if (longest == 0) return make_error("embed: no tokens to embed");
  ContextOptions opt = base;
  opt.n_ctx = static_cast<int64_t>(longest);
  opt.n_batch = static_cast<int64_t>(longest);  // one decode() per input
  opt.n_ubatch = std::min(base.n_ubatch > 0 ? base.n_ubatch : ContextOptions{}.n_ubatch, opt.n_ctx);
  opt.embeddings = true;
  // Backends of our own (their scratch is per backend) over the model's devices and the server's
  // thread pool; each device's compute arena, in turns with the engine (and every other model there).
  std::vector<std::unique_ptr<Backend>> own;
  const BackendOf backend_of = [&](Device& device) -> Backend& {
    own.push_back(st.devices->new_backend(device));
    own.back()->set_scratch_owner_name(device.name() + " scratch (embeddings of " + st.name + ")");
    return *own.back();
  };
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, create_placed_context(st.placed, *st.devices, opt, backend_of));
  std::vector<std::vector<float>> out;
  out.reserve(inputs.size());
  for (const auto& in : inputs) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> v, embed_tokens(*ctx, in, pooling));
    if (pooling != Pooling::None) normalize_euclidean(v);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kiln::serve
