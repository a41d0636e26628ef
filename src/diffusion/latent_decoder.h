// LatentDecoder: what turns a final latent into the image, as stable-diffusion.cpp's
// decode_first_stage does with its VAE or TAESD (VAE::decode in its model/vae/vae.hpp): the latent
// in the diffusion's scale divided by the decoder's latent scale, the network over the whole latent
// or tile by tile (tiling.h), then, for a decoder whose output is in [-1, 1], (x + 1) / 2 clamped to
// [0, 1]. Latents are stable-diffusion.cpp's [w, h, c] planes (4 planes of width * height floats);
// images 3 planes (R, G, B) of 8 width * 8 height floats.
//
// A compute limit (bytes, 0: none) makes a whole-latent decode whose graph would need more than it
// go tiled instead, as stable-diffusion.cpp's auto-fit retries a decode that failed: with its
// 256-cell tiles when they fit, else the largest of 128, 64 ... 4 that does.
// Thread-safety: none; one decode at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/tiling.h"

namespace kiln::diffusion {

class LatentDecoder {
 public:
  virtual ~LatentDecoder() = default;

  // z: 4 planes of width * height floats. tiling: null for one pass over the whole latent.
  // Returns 3 planes of 8 width * 8 height floats.
  Result<std::vector<float>> decode(std::span<const float> z, int64_t width, int64_t height,
                                    const TilingParams* tiling = nullptr);

  void set_compute_limit(size_t bytes) { compute_limit_ = bytes; }
  // After a decode: the tile size (latent cells) the compute limit made it use, 0 when it did not.
  int auto_tile_size() const { return auto_tile_; }

  // The network alone on a latent already in its own scale: its raw output planes.
  virtual Result<std::vector<float>> decode_raw(std::span<const float> vae_z, int64_t width,
                                                int64_t height) = 0;
  // The compute arena bytes decode_raw's graph needs for a width x height latent.
  virtual Result<size_t> graph_bytes(int64_t width, int64_t height) = 0;

 protected:
  // stable-diffusion.cpp's diffusion_to_vae_latents: the decoder sees z / latent_scale().
  virtual float latent_scale() const = 0;
  // True when the network's output is in [-1, 1] (VAE::scale_input): mapped to [0, 1] and clamped.
  virtual bool signed_output() const = 0;

 private:
  Result<std::vector<float>> decode_tiled(std::span<const float> vae_z, int64_t width, int64_t height,
                                          const TilingParams& tiling);
  size_t compute_limit_ = 0;
  int auto_tile_ = 0;
};

// planes: exactly 3 planes of width * height floats (asserted) -> width * height RGB bytes,
// row-major, each value 0 at or below 0, 255 at or above 1, else value * 255 + 0.5 truncated
// (sd-cli's preprocessing_float_to_u8).
std::vector<uint8_t> rgb_planes_to_pixels(std::span<const float> planes, int64_t width, int64_t height);

}  // namespace kiln::diffusion
