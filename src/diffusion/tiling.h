// Tiled processing of an image or a latent as stable-diffusion.cpp's --vae-tiling does it
// (process_tiles_2d and sd_tiling_calc_tiles in its core/ggml_extend.hpp, VAE::get_tile_sizes in
// model/vae/vae.hpp): the small side (the latent's) is cut into tiles of a size in latent cells
// that overlap by about a target fraction, each tile run through the network alone, and the outputs
// blended into one: every output value adds the tile's value times smootherstep of its distance to
// the tile's inner edges over the overlap. Planes are stable-diffusion.cpp's [w, h, c]. Only the
// non-circular case.
// Thread-safety: pure functions (the tile function's own aside).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"

namespace kiln::diffusion {

// sd-cli's --vae-tile-size / --vae-tile-overlap / --vae-relative-tile-size (sd_tiling_params_t).
struct TilingParams {
  int tile_size_x = 0;  // in latent cells; below 4: the default (32)
  int tile_size_y = 0;
  float target_overlap = 0.5f;  // clamped to [0, 0.5]
  float rel_size_x = 0.0f;      // > 0: a fraction of the latent (<= 1) or a count of tiles (> 1)
  float rel_size_y = 0.0f;
};

struct TileSizes {
  int x = 0, y = 0;
  float overlap = 0.0f;
};
// ref: VAE::get_tile_sizes: for a latent of latent_x by latent_y cells, each at least 4 and at most
// the latent's side.
TileSizes tile_sizes(const TilingParams& params, int64_t latent_x, int64_t latent_y,
                     float encoding_factor = 1.0f);

// A tile's computation: `channels` planes of width * height floats in, its output planes out
// (scale times or 1 / scale times the side).
using TileFn =
    std::function<Result<std::vector<float>>(std::span<const float> tile, int64_t width, int64_t height)>;

// ref: process_tiles_2d (not circular). input: `channels` planes of in_w * in_h floats; the output
// is out_w by out_h (one of the two `scale` times the other), its planes as many as the tile
// function gives. Tiles of sizes.x by sizes.y cells of the smaller side.
Result<std::vector<float>> process_tiles_2d(std::span<const float> input, int64_t in_w, int64_t in_h,
                                            int64_t channels, int64_t out_w, int64_t out_h, int scale,
                                            const TileSizes& sizes, const TileFn& fn);

}  // namespace kiln::diffusion
