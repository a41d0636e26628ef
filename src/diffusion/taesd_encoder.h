// TaesdEncoder: TAESD's encoder (models/sd/taesd.h) run over kiln's runtime, as
// stable-diffusion.cpp's TinyImageAutoEncoder encodes for img2img (VAE::encode without scaling, no
// tiling): the image in [0, 1] in, the diffusion's latent out (TAESD's latent needs no sampling or
// scale). Images and latents are stable-diffusion.cpp's [w, h, c] planes.
//
// Devices and memory: a resident of its device under the owner "taesd encoder"
// (diffusion/device_network.h). Ownership: shares the weight file; the Backend (and a shared arena)
// must outlive the encoder. Thread-safety: none; one encode at a time.
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

class TaesdEncoder {
 public:
  // Binds the encoder under `prefix` (sd::kTaesdEncoderPrefix for a taesd.safetensors file).
  static Result<std::unique_ptr<TaesdEncoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                      const std::string& prefix, const NetworkPlacement& placement);

  // image: 3 planes of width * height floats in [0, 1] (sides multiples of 8). Returns the latent,
  // 4 planes of (width / 8) * (height / 8) floats.
  Result<std::vector<float>> encode(std::span<const float> image, int64_t width, int64_t height);

 private:
  TaesdEncoder() = default;
  BoundNetwork<sd::TaesdEncoderWeights> net_;
};

}  // namespace kiln::diffusion
