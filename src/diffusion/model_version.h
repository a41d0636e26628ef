// Which UNet model a set of tensors is, by stable-diffusion.cpp's rules (ModelLoader::
// get_sd_version, its SD 1.x / 2.x / XL branches) over tensor names and shapes:
// - SDXL: UNet tensors and a second text encoder (conditioner.embedders.1 / cond_stage_model.1 /
//   te.1); SD 1.x: a 768-wide CLIP token embedding; SD 2.x: a 1024-wide one.
// - Variants: inpainting (9 UNet input channels), instruct-pix2pix (8), and the distilled UNets
//   without middle_block.1: SD1 tiny / SDXS-512 (no output_blocks.7.1), SD2 tiny / SDXS-0.9 (a
//   1024-wide output_blocks.7.1 attention), SDXL SSD-1B / Vega (no output_blocks.3.1 second
//   transformer block).
// Names are those stable-diffusion.cpp's loader holds: a single-file checkpoint's as written
// (model.diffusion_model.*, cond_stage_model.*, conditioner.embedders.*), or diffusers' unet.*.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"
#include "diffusion/model_family.h"

namespace kiln::diffusion {

enum class UnetVariant { Standard, Inpaint, Pix2Pix, TinyUnet, Sdxs, Ssd1b, Vega };

struct ModelVersion {
  ModelFamily family;
  UnetVariant variant;
  bool operator==(const ModelVersion&) const = default;
};

// A tensor's name and shape, outermost dimension first (PyTorch and safetensors order).
struct NamedShape {
  std::string_view name;
  std::span<const int64_t> shape;
};

// `tensors` in file order (where two names could give the text encoder's width, the last one
// counts, as in stable-diffusion.cpp). An Error when the tensors are no SD 1.x/2.x/XL UNet model
// (no UNet tensors, or a text encoder width other than 768 or 1024 without a second encoder).
Result<ModelVersion> detect_model_version(std::span<const NamedShape> tensors);

// "SD 1.x", "SD 1.x (inpainting)", "SDXL (SSD-1B)", ... for messages.
std::string describe(ModelVersion version);

}  // namespace kiln::diffusion
