// UnetModel: the SD 1.x / 2.x UNet (models/sd/unet.h) run over kiln's runtime: one evaluation, the
// noise (or v) prediction for a latent, a timestep and the text conditioning, as
// stable-diffusion.cpp's UNetModelRunner::compute gives it. Latents are in stable-diffusion.cpp's
// memory order ([w, h, c] planes: each channel's rows of pixels); the graph turns them into its
// channel-innermost grids and back.
//
// Devices and memory: a resident of its device under the owner "sd unet" (diffusion/device_network.h:
// its tensors placed there, the device's arena or its own). Ownership: shares the weight file; the
// Backend (and a shared arena) must outlive the model. Thread-safety: none; one evaluation at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/device_network.h"
#include "models/sd/unet.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class UnetModel {
 public:
  // Binds the UNet under `prefix` (sd::kSdUnetPrefix for single-file checkpoints) in `file`, of the
  // architecture `arch` (unet_arch_for gives the detected version's).
  static Result<std::unique_ptr<UnetModel>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                   const std::string& prefix, const sd::UnetArch& arch,
                                                   const NetworkPlacement& placement);

  const sd::UnetHParams& hparams() const { return weights_.hp; }

  // x: in_channels planes of width * height floats (width and height positive multiples of 8);
  // context: n_ctx >= 1 rows of context_dim floats (the conditioning, 77 per prompt chunk).
  // Returns out_channels planes of width * height floats.
  Result<std::vector<float>> eval(std::span<const float> x, int64_t width, int64_t height, float timestep,
                                  std::span<const float> context);

 private:
  UnetModel() = default;
  std::unique_ptr<DeviceNetwork> net_;
  std::shared_ptr<const sd::SdWeightFile> file_;
  sd::UnetWeights weights_;
};

}  // namespace kiln::diffusion
