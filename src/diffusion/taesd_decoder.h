// TaesdDecoder: TAESD's decoder (models/sd/taesd.h) run over kiln's runtime: a latent in, the RGB
// image out as stable-diffusion.cpp's TinyImageAutoEncoder::decode gives it (about [0, 1]), and
// the 8-bit pixels sd-cli writes of it. Latents and images are in stable-diffusion.cpp's memory
// order ([w, h, c] planes); the graph turns them into its channel-innermost grids and back.
//
// Devices and memory: a resident of its device under the owner "taesd decoder"
// (diffusion/device_network.h). Ownership: shares the weight file; the Backend (and a shared arena) must outlive the decoder. Thread-safety: none; one
// decode at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/device_network.h"
#include "models/sd/taesd.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class TaesdDecoder {
 public:
  // Binds the decoder under `prefix` (sd::kTaesdDecoderPrefix for a taesd.safetensors file).
  static Result<std::unique_ptr<TaesdDecoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                      const std::string& prefix, const NetworkPlacement& placement);

  // z: 4 planes of width * height floats (each side in [1, 2048]). Returns 3 planes of
  // 8 width * 8 height floats.
  Result<std::vector<float>> decode(std::span<const float> z, int64_t width, int64_t height);

 private:
  TaesdDecoder() = default;
  std::unique_ptr<DeviceNetwork> net_;
  std::shared_ptr<const sd::SdWeightFile> file_;
  sd::TaesdDecoderWeights weights_;
};

// planes: exactly 3 planes of width * height floats (asserted) -> width * height RGB bytes, row-major, each value
// 0 at or below 0, 255 at or above 1, else value * 255 + 0.5 truncated (sd-cli's
// preprocessing_float_to_u8).
std::vector<uint8_t> rgb_planes_to_pixels(std::span<const float> planes, int64_t width, int64_t height);

}  // namespace kiln::diffusion
