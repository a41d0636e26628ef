// The `parameters` text A1111 (and sd-cli, get_image_params) writes into a generated PNG, so that
// tools that read it (A1111's PNG info, ComfyUI, image browsers) show how the image was made:
//   PROMPT
//   Negative prompt: NEGATIVE            (only when there is one)
//   Steps: 20, CFG scale: 7.000000, Eta: 1.000000, Seed: 42, Size: 512x512, Model: FILE, RNG: cuda,
//   Sampler: euler_a discrete, Denoising strength: 0.75, TE: FILE, Unet: FILE, Clip skip: N, Version: kiln
// with sd-cli's field order and number formats (std::to_string); files by their base names, TE and
// Unet only when given apart, Clip skip only when the user set it. Denoising strength (image to
// image only; sd-cli leaves it out) as A1111 writes it: the strength as Python prints a float, the
// shortest text that reads back as the same number ("0.75", "1.0").
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "diffusion/text_to_image.h"

namespace kiln::diffusion {

struct ParameterFiles {
  std::string model;            // -m, or ""
  std::string clip_l;           // --clip_l, or ""
  std::string diffusion_model;  // --diffusion-model, or ""
};

// seed: this image's (params.seed + its index in the batch). clip_skip_given: --clip-skip was set.
// denoising_strength: image to image's --strength, nullopt for text to image.
std::string a1111_parameters(const TextToImageParams& params, int64_t seed, const ParameterFiles& files,
                             bool clip_skip_given, std::optional<float> denoising_strength = std::nullopt);

}  // namespace kiln::diffusion
