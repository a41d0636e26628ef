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
  // A backend of our own (its scratch is per backend) over the server's device and thread pool;
  // the device's compute arena, in turns with the engine (and every other model there).
  Device& device = st.weights->device();
  opt.arena = &st.devices->arena(device);
  const std::unique_ptr<Backend> backend = st.devices->new_backend(device);
  backend->set_scratch_owner_name(device.name() + " scratch (embeddings of " + st.name + ")");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, Context::create(st.weights, *backend, opt));
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
