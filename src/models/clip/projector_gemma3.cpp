// Gemma 3's projector: a SigLIP ViT, average pooling of the patch grid (n_merge x n_merge windows,
// default 4), RMS norm times mm.soft_emb_norm, then a projection to the text model's width.
// Images are resized to the encoder's square with bilinear filtering, keeping the aspect ratio on
// a black background; the prompt wraps them in <start_of_image> ... <end_of_image> and their
// tokens attend both ways.
// ref: llama.cpp tools/mtmd/models/siglip.cpp (PROJECTOR_TYPE_GEMMA3), clip.cpp load_hparams,
// mtmd.cpp init_vision.
#include "models/clip/projector.h"
#include "models/weight_binder.h"
#include "image/resize.h"

namespace kiln {
namespace {

constexpr int64_t kDefaultMerge = 4;  // every Gemma 3 size; tiny test models set scale_factor

class Gemma3Projector final : public Projector {
 public:
  Gemma3Projector(ClipHParams hp, VitWeights vit, Weight soft_emb_norm, Weight input_proj, int64_t merge)
      : Projector(std::move(hp), std::move(vit)),
        soft_emb_norm_(soft_emb_norm),
        input_proj_(input_proj),
        merge_(merge) {}

  std::string_view name() const override { return "gemma3"; }
  int64_t n_embd_out() const override { return input_proj_.view.ne[0]; }
  ImageMarkup markup() const override { return {"<start_of_image>", "<end_of_image>", true}; }

  RgbImage prepare(const RgbImage& image) const override {
    const auto side = static_cast<int32_t>(hp_.image_size);
    return resize_to_fit(image, side, side, ResizeFilter::Bilinear, PadStyle::Ceil, {0, 0, 0});
  }
  int64_t n_tokens(const RgbImage&) const override {
    const int64_t side = hp_.patches_per_side() / merge_;
    return side * side;
  }
  std::pair<int32_t, int32_t> worst_case_size() const override {
    return {static_cast<int32_t>(hp_.image_size), static_cast<int32_t>(hp_.image_size)};
  }

  Result<EncoderGraph> build(Graph& g, int32_t, int32_t, AttentionPath attention) const override {
    const int64_t n_side = hp_.patches_per_side(), D = hp_.n_embd;
    EncoderGraph out;
    out.patches = g.input("patches", DType::F32, {3 * hp_.patch_size * hp_.patch_size, n_side * n_side, 1, 1});
    Tensor x = vit_patch_embeddings(g, hp_, vit_, out.patches);
    x = g.add(x, weight_tensor(g, vit_.pos_embd), "pos_embed");
    if (vit_.pre_ln_w) x = vit_norm(g, x, vit_.pre_ln_w, vit_.pre_ln_b, hp_.eps, "pre_ln");
    x = vit_blocks(g, vit_dims(hp_), vit_.layers, x, hp_.n_layer, attention);
    if (vit_.post_ln_w) x = vit_norm(g, x, vit_.post_ln_w, vit_.post_ln_b, hp_.eps, "post_ln");
    // Pool merge x merge windows of the patch grid (x along dim 1, y along dim 2).
    x = g.avg_pool_2d(g.reshape(x, {D, n_side, n_side, 1}), static_cast<int>(merge_), "pool");
    const int64_t n_out = (n_side / merge_) * (n_side / merge_);
    x = g.reshape(x, {D, n_out, 1, 1});
    x = g.rms_norm_mul(x, weight_tensor(g, soft_emb_norm_), hp_.eps, "soft_emb_norm");
    // ref: ggml_mul_mat(ggml_cont(ggml_transpose(mm_input_proj_w)), cur): the projection is stored
    // [n_embd_text, n_embd] and used transposed, copied in its own type.
    const Tensor proj = weight_tensor(g, input_proj_);
    const Tensor proj_t = g.cast(g.transpose(proj), input_proj_.view.type, "input_projection_t");
    out.embeddings = g.mul_mat(proj_t, x, "input_projection");
    g.mark_output(out.embeddings);
    KILN_TRY(g.status());
    return out;
  }

 private:
  Weight soft_emb_norm_;  // [n_embd]
  Weight input_proj_;     // [n_embd_text, n_embd]
  int64_t merge_;
};

}  // namespace

Result<std::unique_ptr<Projector>> make_gemma3_projector(const GgufFile& file, const ClipHParams& hp) {
  const int64_t merge = hp.scale_factor > 0 ? hp.scale_factor : kDefaultMerge;
  if (hp.patches_per_side() % merge != 0)
    return make_error("mmproj: gemma3 pools ", merge, " x ", merge, " patches, which does not tile the ",
                      hp.patches_per_side(), " x ", hp.patches_per_side(), " patch grid");
  KILN_ASSIGN_OR_RETURN(VitWeights vit, bind_vit_weights(file, hp));
  if (vit.class_embd) return make_error("mmproj: gemma3 files have no class token (v.class_embd)");
  const WeightBinder b(file, "mmproj");
  KILN_ASSIGN_OR_RETURN(Weight norm, b.required("mm.soft_emb_norm.weight", {hp.n_embd}));
  const GgufTensorInfo* proj = file.find_tensor("mm.input_projection.weight");
  if (proj == nullptr) return make_error("mmproj: missing tensor 'mm.input_projection.weight'");
  KILN_ASSIGN_OR_RETURN(Weight input_proj, b.required("mm.input_projection.weight", {proj->ne[0], hp.n_embd}));
  if (input_proj.view.type != DType::F32 && input_proj.view.type != DType::F16 && input_proj.view.type != DType::BF16)
    return make_error("mmproj: mm.input_projection.weight is ", dtype_name(input_proj.view.type),
                      "; gemma3's projection must be f32, f16 or bf16 (it is used transposed)");
  return std::unique_ptr<Projector>(new Gemma3Projector(hp, std::move(vit), norm, input_proj, merge));
}

}  // namespace kiln
