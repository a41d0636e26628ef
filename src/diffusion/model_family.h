// The UNet model families kiln's image generation knows, as stable-diffusion.cpp tells them apart.
#pragma once

#include <string_view>

namespace kiln::diffusion {

enum class ModelFamily { Sd1, Sd2, Sdxl };

std::string_view model_family_name(ModelFamily family);  // "SD 1.x", "SD 2.x", "SDXL"

}  // namespace kiln::diffusion
