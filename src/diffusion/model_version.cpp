#include "diffusion/model_version.h"

#include <array>

namespace kiln::diffusion {
namespace {

bool contains(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// ggml's ne[k] (innermost first) of a PyTorch-order shape; 1 past its rank, as ggml pads.
int64_t ne(std::span<const int64_t> shape, size_t k) {
  return k < shape.size() ? shape[shape.size() - 1 - k] : 1;
}

constexpr std::array<std::string_view, 6> kTokenEmbeddings = {
    "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight",
    "cond_stage_model.model.token_embedding.weight",
    "text_model.embeddings.token_embedding.weight",
    "te.text_model.embeddings.token_embedding.weight",
    "conditioner.embedders.0.model.token_embedding.weight",
    "conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight",
};

struct Evidence {
  bool unet = false;
  bool second_encoder = false;
  bool middle_block_1 = false;
  bool output_block_3_1_second_transformer = false;
  bool output_block_7_1 = false;
  bool attention_7_1_is_1024 = false;
  int64_t text_width = 0;        // the token embedding's ne[0], 0 if none
  int64_t unet_in_channels = 0;  // the first UNet convolution's ne[2], 0 if none
};

Evidence gather(std::span<const NamedShape> tensors) {
  Evidence e;
  for (const NamedShape& t : tensors) {
    const std::string_view n = t.name;
    if (contains(n, "model.diffusion_model.input_blocks.") || contains(n, "unet.down_blocks.")) e.unet = true;
    if (contains(n, "conditioner.embedders.1") || contains(n, "cond_stage_model.1") || contains(n, "te.1")) {
      e.second_encoder = true;
    }
    if (contains(n, "model.diffusion_model.middle_block.1.") || contains(n, "unet.mid_block.resnets.1.")) {
      e.middle_block_1 = true;
    }
    if (contains(n, "model.diffusion_model.output_blocks.3.1.transformer_blocks.1") ||
        contains(n, "unet.up_blocks.1.attentions.0.transformer_blocks.1")) {
      e.output_block_3_1_second_transformer = true;
    }
    if (contains(n, "model.diffusion_model.output_blocks.7.1") ||
        contains(n, "unet.up_blocks.2.attentions.1")) {
      e.output_block_7_1 = true;
      if (contains(n, "model.diffusion_model.output_blocks.7.1.transformer_blocks.0.attn1.to_k.weight") &&
          ne(t.shape, 0) == 1024) {
        e.attention_7_1_is_1024 = true;
      }
    }
    for (std::string_view token_embedding : kTokenEmbeddings) {
      if (n == token_embedding) e.text_width = ne(t.shape, 0);
    }
    if (n == "model.diffusion_model.input_blocks.0.0.weight" || n == "unet.conv_in.weight") {
      e.unet_in_channels = ne(t.shape, 2);
    }
  }
  return e;
}

}  // namespace

Result<ModelVersion> detect_model_version(std::span<const NamedShape> tensors) {
  const Evidence e = gather(tensors);
  if (!e.unet)
    return make_error("diffusion: no SD 1.x/2.x/XL UNet tensors (model.diffusion_model.input_blocks.*)");
  const bool inpaint = e.unet_in_channels == 9;
  const bool pix2pix = e.unet_in_channels == 8;
  if (e.second_encoder) {
    if (inpaint) return ModelVersion{ModelFamily::Sdxl, UnetVariant::Inpaint};
    if (pix2pix) return ModelVersion{ModelFamily::Sdxl, UnetVariant::Pix2Pix};
    if (!e.middle_block_1) {
      return ModelVersion{ModelFamily::Sdxl,
                          e.output_block_3_1_second_transformer ? UnetVariant::Ssd1b : UnetVariant::Vega};
    }
    return ModelVersion{ModelFamily::Sdxl, UnetVariant::Standard};
  }
  if (e.text_width == 768) {
    if (inpaint) return ModelVersion{ModelFamily::Sd1, UnetVariant::Inpaint};
    if (pix2pix) return ModelVersion{ModelFamily::Sd1, UnetVariant::Pix2Pix};
    if (!e.middle_block_1) {
      return ModelVersion{ModelFamily::Sd1, e.output_block_7_1 ? UnetVariant::TinyUnet : UnetVariant::Sdxs};
    }
    return ModelVersion{ModelFamily::Sd1, UnetVariant::Standard};
  }
  if (e.text_width == 1024) {
    if (inpaint) return ModelVersion{ModelFamily::Sd2, UnetVariant::Inpaint};
    if (!e.middle_block_1) {
      return ModelVersion{ModelFamily::Sd2,
                          e.attention_7_1_is_1024 ? UnetVariant::Sdxs : UnetVariant::TinyUnet};
    }
    return ModelVersion{ModelFamily::Sd2, UnetVariant::Standard};
  }
  return make_error(
      "diffusion: a UNet, but no CLIP text encoder of width 768 (SD 1.x) or 1024 (SD 2.x) and no "
      "second text encoder (SDXL); text encoder width ",
      e.text_width);
}

std::string describe(ModelVersion version) {
  std::string out(model_family_name(version.family));
  switch (version.variant) {
    case UnetVariant::Standard:
      return out;
    case UnetVariant::Inpaint:
      return out + " (inpainting)";
    case UnetVariant::Pix2Pix:
      return out + " (instruct-pix2pix)";
    case UnetVariant::TinyUnet:
      return out + " (tiny UNet)";
    case UnetVariant::Sdxs:
      return out + (version.family == ModelFamily::Sd1 ? " (SDXS-512)" : " (SDXS-0.9)");
    case UnetVariant::Ssd1b:
      return out + " (SSD-1B)";
    case UnetVariant::Vega:
      return out + " (Vega)";
  }
  return out;
}

}  // namespace kiln::diffusion
