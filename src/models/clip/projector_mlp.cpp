// LLaVA-1.5's projector ("mlp"): a CLIP ViT with a class token, of whose blocks all but the last
// run, then a two-layer MLP with GELU (mm.0, mm.2) over the patch tokens. Images are resized to
// the encoder's square with bicubic filtering, keeping the aspect ratio on CLIP's mean colour
// (122, 116, 104); no text around them; causal attention.
// ref: llama.cpp tools/mtmd/models/llava.cpp (PROJECTOR_TYPE_MLP), clip.cpp load_hparams and the
// "patches" input of clip_image_batch_encode.
//
// Not supported (refused at load): the Yi-style variant with mm.3/mm.4 (mlp_norm), LLaVA-1.6's
// image tiling (clip.vision.image_grid_pinpoints) and explicit feature layers (granite vision).
#include "image/resize.h"
#include "models/clip/projector.h"
#include "models/weight_binder.h"

namespace kiln {
namespace {

class MlpProjector final : public Projector {
 public:
  MlpProjector(ClipHParams hp, VitWeights vit, Weight w0, Weight b0, Weight w2, Weight b2)
      : Projector(std::move(hp), std::move(vit)), w0_(w0), b0_(b0), w2_(w2), b2_(b2) {}

  std::string_view name() const override { return "mlp"; }
  int64_t n_embd_out() const override { return w2_ ? w2_.view.ne[1] : w0_.view.ne[1]; }
  ImageMarkup markup() const override { return {}; }

  RgbImage prepare(const RgbImage& image) const override {
    const auto side = static_cast<int32_t>(hp_.image_size);
    return resize_to_fit(image, side, side, ResizeFilter::Bicubic, PadStyle::Ceil, {122, 116, 104});
  }
  int64_t n_tokens(const RgbImage&) const override { return hp_.patches_per_side() * hp_.patches_per_side(); }
  std::pair<int32_t, int32_t> worst_case_size() const override {
    return {static_cast<int32_t>(hp_.image_size), static_cast<int32_t>(hp_.image_size)};
  }

  Result<EncoderGraph> build(Graph& g, int32_t, int32_t, AttentionPath attention) const override {
    const int64_t n_patches = hp_.patches_per_side() * hp_.patches_per_side(), D = hp_.n_embd;
    EncoderGraph out;
    out.patches = g.input("patches", DType::F32, {3 * hp_.patch_size * hp_.patch_size, n_patches, 1, 1});
    Tensor x = vit_patch_embeddings(g, hp_, vit_, out.patches);
    // ref: llava.cpp: the class token goes after the patches; position i is added to token i.
    if (vit_.class_embd) x = g.concat(x, g.reshape(weight_tensor(g, vit_.class_embd), {D, 1, 1, 1}), 1, "with_class");
    x = g.add(x, weight_tensor(g, vit_.pos_embd), "pos_embed");
    if (vit_.pre_ln_w) x = vit_norm(g, x, vit_.pre_ln_w, vit_.pre_ln_b, hp_.eps, "pre_ln");
    x = vit_blocks(g, vit_dims(hp_), vit_.layers, x, hp_.n_layer - 1, attention);  // the last block's output is not used
    if (vit_.post_ln_w) x = vit_norm(g, x, vit_.post_ln_w, vit_.post_ln_b, hp_.eps, "post_ln");
    // ref: clip.cpp's "patches" rows 1..n_patches: with a class token (last) this skips the first
    // patch and keeps the class token, as llama.cpp does.
    const size_t row = g.tensor(x).view.nb[1];
    if (vit_.class_embd) x = g.view(x, {D, n_patches, 1, 1}, {sizeof(float), row, row * n_patches, row * n_patches}, row, "patches_out");
    x = g.gelu(vit_linear(g, w0_, b0_, x, "mm.0"), "mm.gelu");
    if (w2_) x = vit_linear(g, w2_, b2_, x, "mm.2");
    out.embeddings = x;
    g.mark_output(out.embeddings);
    KILN_TRY(g.status());
    return out;
  }

 private:
  Weight w0_, b0_;  // [n_embd, n_mm], [n_mm]
  Weight w2_, b2_;  // [n_mm, n_mm], [n_mm]; optional
};

}  // namespace

Result<std::unique_ptr<Projector>> make_mlp_projector(const GgufFile& file, const ClipHParams& hp) {
  if (file.find_tensor("mm.3.weight") != nullptr)
    return make_error("mmproj: an mlp projector with mm.3 (Yi-style LLaVA, mlp_norm) is not supported");
  if (file.find("clip.vision.image_grid_pinpoints") != nullptr)
    return make_error("mmproj: LLaVA-1.6 image tiling (clip.vision.image_grid_pinpoints) is not supported");
  if (file.find("clip.vision.feature_layer") != nullptr)
    return make_error("mmproj: explicit vision feature layers (clip.vision.feature_layer) are not supported");
  if (hp.n_layer < 2) return make_error("mmproj: an mlp projector needs at least 2 ViT blocks (it skips the last)");
  KILN_ASSIGN_OR_RETURN(VitWeights vit, bind_vit_weights(file, hp));
  const WeightBinder b(file, "mmproj");
  const GgufTensorInfo* t0 = file.find_tensor("mm.0.weight");
  if (t0 == nullptr) return make_error("mmproj: missing tensor 'mm.0.weight'");
  const int64_t n_mm = t0->ne[1];
  KILN_ASSIGN_OR_RETURN(Weight w0, b.required("mm.0.weight", {hp.n_embd, n_mm}));
  KILN_ASSIGN_OR_RETURN(Weight b0, b.required("mm.0.bias", {n_mm}));
  KILN_ASSIGN_OR_RETURN(Weight w2, b.optional("mm.2.weight", {n_mm, n_mm}));
  KILN_ASSIGN_OR_RETURN(Weight b2, b.optional("mm.2.bias", {n_mm}));
  if (static_cast<bool>(w2) != static_cast<bool>(b2)) return make_error("mmproj: mm.2 needs both its weight and bias");
  return std::unique_ptr<Projector>(new MlpProjector(hp, std::move(vit), w0, b0, w2, b2));
}

}  // namespace kiln
