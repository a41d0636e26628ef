// VaeDecoder: the AutoencoderKL decoder (models/sd/vae.h) run over kiln's runtime, as
// stable-diffusion.cpp's decode_first_stage runs its VAE for SD 1.x/2.x (LatentDecoder: the latent
// divided by sd::kSd1VaeScale, post_quant_conv and the decoder, whole or tiled, then (x + 1) / 2
// clamped to [0, 1]). Latents and images are stable-diffusion.cpp's [w, h, c] planes.
//
// Devices and memory: a resident of its device under the owner "sd vae decoder"
// (diffusion/device_network.h). Ownership: shares the weight file; the Backend (and a shared arena)
// must outlive the decoder. Thread-safety: none; one decode at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/device_network.h"
#include "diffusion/latent_decoder.h"
#include "diffusion/plane_graph.h"
#include "models/sd/vae.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class VaeDecoder : public LatentDecoder {
 public:
  // Binds the decoder under `prefix` ("" for a standalone VAE file, sd::kSdVaePrefix in a
  // single-file checkpoint).
  static Result<std::unique_ptr<VaeDecoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                    const std::string& prefix, const NetworkPlacement& placement);

  // LatentDecoder's: the decoder's output before (x + 1) / 2 and the clamp, about [-1, 1].
  Result<std::vector<float>> decode_raw(std::span<const float> vae_z, int64_t width, int64_t height) override;
  Result<size_t> graph_bytes(int64_t width, int64_t height) override;

 protected:
  float latent_scale() const override { return sd::kSd1VaeScale; }
  bool signed_output() const override { return true; }

 private:
  GridBody body() const;
  VaeDecoder() = default;
  BoundNetwork<sd::VaeDecoderWeights> net_;
};

}  // namespace kiln::diffusion
