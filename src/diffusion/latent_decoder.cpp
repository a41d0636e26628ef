#include "diffusion/latent_decoder.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::diffusion {
namespace {

constexpr int64_t kLatentChannels = 4;
constexpr int kScale = 8;  // image pixels per latent cell, each way
// ref: prepare_vae_decode_retry_tiling: 256-cell tiles; kiln halves them down to 4 until one fits.
constexpr int kAutoTileSizes[] = {256, 128, 64, 32, 16, 8, 4};

}  // namespace

Result<std::vector<float>> LatentDecoder::decode(std::span<const float> z, int64_t width, int64_t height,
                                                 const TilingParams* tiling) {
  auto_tile_ = 0;
  // ref: diffusion_to_vae_latents (SD 1.x/2.x: no shift; TAESD's: none).
  std::vector<float> vae_z(z.begin(), z.end());
  const float scale = latent_scale();
  if (scale != 1.0f)
    for (float& v : vae_z) v /= scale;
  Result<std::vector<float>> out = Error{};
  if (tiling != nullptr) {
    out = decode_tiled(vae_z, width, height, *tiling);
  } else if (compute_limit_ > 0) {
    KILN_ASSIGN_OR_RETURN(const size_t whole, graph_bytes(width, height));
    if (whole <= compute_limit_) {
      out = decode_raw(vae_z, width, height);
    } else {
      for (int size : kAutoTileSizes) {
        const TileSizes s = tile_sizes({size, size}, width, height);
        KILN_ASSIGN_OR_RETURN(const size_t bytes, graph_bytes(s.x, s.y));
        auto_tile_ = size;
        if (bytes <= compute_limit_) break;
      }
      out = decode_tiled(vae_z, width, height, {auto_tile_, auto_tile_});
    }
  } else {
    out = decode_raw(vae_z, width, height);
  }
  if (!out.ok()) return out;
  // ref: VAE::decode's scale_tensor_to_0_1.
  if (signed_output())
    for (float& v : *out) v = std::max(0.0f, std::min(1.0f, (v + 1.0f) * 0.5f));
  return out;
}

Result<std::vector<float>> LatentDecoder::decode_tiled(std::span<const float> vae_z, int64_t width,
                                                       int64_t height, const TilingParams& tiling) {
  const TileFn run = [this](std::span<const float> tile, int64_t w, int64_t h) {
    return decode_raw(tile, w, h);
  };
  return process_tiles_2d(vae_z, width, height, kLatentChannels, width * kScale, height * kScale, kScale,
                          tile_sizes(tiling, width, height), run);
}

std::vector<uint8_t> rgb_planes_to_pixels(std::span<const float> planes, int64_t width, int64_t height) {
  const size_t n = static_cast<size_t>(width * height);
  KILN_ASSERT(planes.size() == 3 * n, "rgb_planes_to_pixels: not 3 planes of width * height floats");
  std::vector<uint8_t> pixels(n * 3);
  for (size_t c = 0; c < 3; ++c) {
    for (size_t i = 0; i < n; ++i) {
      const float v = planes[c * n + i];
      pixels[i * 3 + c] = v <= 0.0f ? 0 : v >= 1.0f ? 255 : static_cast<uint8_t>(v * 255.0f + 0.5f);
    }
  }
  return pixels;
}

}  // namespace kiln::diffusion
