// TaesdDecoder: TAESD's decoder (models/sd/taesd.h) run over kiln's runtime: a latent in, the RGB
// image out as stable-diffusion.cpp's TinyImageAutoEncoder::decode gives it (about [0, 1]).
// Latents and images are in stable-diffusion.cpp's memory order ([w, h, c] planes; plane_graph.h).
//
// Devices and memory: a resident of its device under the owner "taesd decoder"
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
#include "models/sd/taesd.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class TaesdDecoder : public LatentDecoder {
 public:
  // Binds the decoder under `prefix` (sd::kTaesdDecoderPrefix for a taesd.safetensors file).
  static Result<std::unique_ptr<TaesdDecoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                      const std::string& prefix, const NetworkPlacement& placement);

  // LatentDecoder's: TAESD decodes the diffusion's latent unscaled, to about [0, 1].
  Result<std::vector<float>> decode_raw(std::span<const float> z, int64_t width, int64_t height) override;
  Result<size_t> graph_bytes(int64_t width, int64_t height) override;

 protected:
  float latent_scale() const override { return 1.0f; }
  bool signed_output() const override { return false; }

 private:
  GridBody body() const;
  TaesdDecoder() = default;
  BoundNetwork<sd::TaesdDecoderWeights> net_;
};

}  // namespace kiln::diffusion
