#include "llm/vision_encoder.h"

#include "models/clip/vit.h"

namespace kiln {

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::create(std::shared_ptr<const VisionModel> model,
                                                             Backend& backend,
                                                             const VisionEncoderOptions& options) {
  std::unique_ptr<VisionEncoder> e(new VisionEncoder());
  e->model_ = std::move(model);
  e->attention_ =
      options.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  const auto [w, h] = e->model_->projector().worst_case_size();
  Staging staging;
  KILN_ASSIGN_OR_RETURN(
      e->core_, MediaEncoder::create(std::shared_ptr<const GgufFile>(e->model_, &e->model_->file()),
                                     "mmproj " + e->model_->name(), "vision encoder", backend, options,
                                     [&](Graph& g) { return e->build(g, w, h, nullptr, staging); }));
  return e;
}

Result<EncoderPass> VisionEncoder::build(Graph& g, int32_t width, int32_t height, const PreparedImage* image,
                                         Staging& staging) const {
  const Projector& proj = model_->projector();
  KILN_ASSIGN_OR_RETURN(staging.graph, proj.build(g, width, height, attention_));
  const EncoderGraph& eg = staging.graph;
  staging.patches.resize(static_cast<size_t>(g.tensor(eg.patches).view.nelements()));
  if (image != nullptr) image_to_patches(image->pixels, proj.hparams(), staging.patches);
  EncoderPass pass{.inputs = {{eg.patches, staging.patches.data()}}, .embeddings = eg.embeddings};
  for (const ConstantInput& c : eg.constants) pass.inputs.push_back({c.tensor, c.values.data()});
  return pass;
}

Result<std::shared_ptr<const ImageEmbeddings>> VisionEncoder::encode(const PreparedImage& image) {
  Staging staging;
  return core_->encode(image.id, image.n_tokens, model_->projector().markup().non_causal, [&](Graph& g) {
    return build(g, image.pixels.width, image.pixels.height, &image, staging);
  });
}

}  // namespace kiln
