// The per-tensor type rules of stable-diffusion.cpp's `convert` (sd-cli -M convert --type T) for
// Stable Diffusion model files: one target type for the whole file, and which tensors take it.
// ref: ModelLoader::tensor_should_be_converted (stable-diffusion.cpp src/model_loader.cpp, 97d2990).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor_view.h"

namespace kiln::quantize {

// Whether a tensor of this name and shape (ne[0] = elements per row) is converted to `type`: every
// tensor except those whose rows are not whole blocks of a quantized `type`, biases (".bias"),
// scales, the UNet's time and label embeddings (time_embed., label_emb.), any embedding table
// ("embedding" in the name) and the Flux/MMDiT input and output layers. Gains of norms are
// converted, as stable-diffusion.cpp converts them (it dequantizes them to F32 at load); conv
// kernels keep their type because their rows (the kernel's width) are not whole blocks.
bool sd_converts_tensor(std::string_view name, const std::array<int64_t, kMaxDims>& ne, DType type);

// The file types stable-diffusion.cpp's --type takes and kiln can write (case-insensitive): F32,
// F16, BF16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, Q6_K, Q5_K, Q4_K, Q3_K, Q2_K; nullopt for anything else.
std::optional<DType> sd_type_from_name(std::string_view name);

}  // namespace kiln::quantize
