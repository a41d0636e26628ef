#include "diffusion/tiling.h"

#include <algorithm>
#include <cmath>

namespace kiln::diffusion {
namespace {

struct TileCount {
  int n = 1;
  float overlap = 0.0f;  // the fraction of a tile two neighbours share
};

// ref: sd_tiling_calc_tiles, not circular. Integer arithmetic as stable-diffusion.cpp's.
TileCount calc_tiles(int small_dim, int tile_size, float target_overlap) {
  const int tile_overlap = static_cast<int>(static_cast<float>(tile_size) * target_overlap);
  const int non_tile_overlap = tile_size - tile_overlap;
  TileCount t;
  t.n = (small_dim - tile_overlap) / non_tile_overlap;
  const int overshoot = ((t.n + 1) * non_tile_overlap + tile_overlap) % small_dim;
  if (overshoot != non_tile_overlap && overshoot <= t.n * (tile_size / 2 - tile_overlap)) ++t.n;
  t.overlap = static_cast<float>(tile_size * t.n - small_dim) / static_cast<float>(tile_size * (t.n - 1));
  if (t.n <= 2) {
    if (small_dim <= tile_size) {
      t = {1, 0.0f};
    } else {
      t.n = 2;
      t.overlap = static_cast<float>(2 * tile_size - small_dim) / static_cast<float>(tile_size);
    }
  }
  return t;
}

float smootherstep(float x) { return x * x * x * (x * (6.0f * x - 15.0f) + 10.0f); }

// ref: sd_tensor_split_2d (x, y inside the input: no wrapping).
std::vector<float> split(std::span<const float> in, int64_t in_w, int64_t in_h, int64_t channels, int64_t w,
                         int64_t h, int64_t x, int64_t y) {
  std::vector<float> out(static_cast<size_t>(channels * w * h));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < w; ++ix)
        out[static_cast<size_t>(c * w * h + iy * w + ix)] =
            in[static_cast<size_t>(c * in_w * in_h + (iy + y) * in_w + ix + x)];
  return out;
}

// ref: sd_tensor_merge_2d, not circular.
void merge(std::span<const float> tile, int64_t w, int64_t h, int64_t channels, std::vector<float>& out,
           int64_t out_w, int64_t out_h, int64_t x, int64_t y, int overlap_x, int overlap_y, int x_skip,
           int y_skip) {
  for (int64_t iy = y_skip; iy < h; ++iy) {
    for (int64_t ix = x_skip; ix < w; ++ix) {
      const int64_t dst = (y + iy) * out_w + x + ix;
      if (overlap_x > 0 || overlap_y > 0) {
        const float ox = static_cast<float>(overlap_x), oy = static_cast<float>(overlap_y);
        const float x0 = overlap_x > 0 && x > 0 ? static_cast<float>(ix - x_skip) / ox : 1.0f;
        const float x1 = overlap_x > 0 && x < out_w - w ? static_cast<float>(w - ix) / ox : 1.0f;
        const float y0 = overlap_y > 0 && y > 0 ? static_cast<float>(iy - y_skip) / oy : 1.0f;
        const float y1 = overlap_y > 0 && y < out_h - h ? static_cast<float>(h - iy) / oy : 1.0f;
        const float fx = std::min(std::min(x0, x1), 1.0f), fy = std::min(std::min(y0, y1), 1.0f);
        for (int64_t c = 0; c < channels; ++c) {
          float& o = out[static_cast<size_t>(c * out_w * out_h + dst)];
          o = o + tile[static_cast<size_t>(c * w * h + iy * w + ix)] * smootherstep(fy) * smootherstep(fx);
        }
      } else {
        for (int64_t c = 0; c < channels; ++c)
          out[static_cast<size_t>(c * out_w * out_h + dst)] =
              tile[static_cast<size_t>(c * w * h + iy * w + ix)];
      }
    }
  }
}

}  // namespace

TileSizes tile_sizes(const TilingParams& params, int64_t latent_x, int64_t latent_y, float encoding_factor) {
  TileSizes s;
  s.overlap = std::max(std::min(params.target_overlap, 0.5f), 0.0f);
  const auto size = [&](int requested, float factor, int64_t latent) {
    constexpr int kDefault = 32, kMin = 4;
    int tile = kDefault;
    if (factor > 0.0f) {
      if (factor > 1.0f) factor = 1 / (factor - factor * s.overlap + s.overlap);
      tile = static_cast<int>(std::round(static_cast<float>(latent) * factor));
    } else if (requested >= kMin) {
      tile = requested;
    }
    tile = static_cast<int>(static_cast<float>(tile) * encoding_factor);
    return std::max(std::min(tile, static_cast<int>(latent)), kMin);
  };
  s.x = size(params.tile_size_x, params.rel_size_x, latent_x);
  s.y = size(params.tile_size_y, params.rel_size_y, latent_y);
  return s;
}

Result<std::vector<float>> process_tiles_2d(std::span<const float> input, int64_t in_w, int64_t in_h,
                                            int64_t channels, int64_t out_w, int64_t out_h, int scale,
                                            const TileSizes& sizes, const TileFn& fn) {
  const bool decode = out_w > in_w;
  if ((decode ? out_w != in_w * scale || out_h != in_h * scale
              : in_w != out_w * scale || in_h != out_h * scale))
    return make_error("tiling: ", in_w, " x ", in_h, " to ", out_w, " x ", out_h, " is not a scale of ",
                      scale);
  if (static_cast<int64_t>(input.size()) != channels * in_w * in_h)
    return make_error("tiling: the input holds ", input.size(), " floats, not ", channels, " x ", in_w, " x ",
                      in_h);
  const int small_w = static_cast<int>(decode ? in_w : out_w),
            small_h = static_cast<int>(decode ? in_h : out_h);
  const TileCount tx = calc_tiles(small_w, sizes.x, sizes.overlap);
  const TileCount ty = calc_tiles(small_h, sizes.y, sizes.overlap);
  const int overlap_x = static_cast<int>(static_cast<float>(sizes.x) * tx.overlap);
  const int overlap_y = static_cast<int>(static_cast<float>(sizes.y) * ty.overlap);
  const int step_x = sizes.x - overlap_x, step_y = sizes.y - overlap_y;
  const int tile_w = std::min(sizes.x, small_w), tile_h = std::min(sizes.y, small_h);
  const int in_scale = decode ? 1 : scale, out_scale = decode ? scale : 1;

  std::vector<float> out;
  int64_t out_channels = 0;
  bool last_y = false;
  for (int y = 0; y < small_h && !last_y; y += step_y) {
    int dy = 0;
    if (y + tile_h >= small_h) {
      dy = (y - (small_h - tile_h)) * out_scale;
      y = small_h - tile_h;
      last_y = true;
    }
    bool last_x = false;
    for (int x = 0; x < small_w && !last_x; x += step_x) {
      int dx = 0;
      if (x + tile_w >= small_w) {
        dx = (x - (small_w - tile_w)) * out_scale;
        x = small_w - tile_w;
        last_x = true;
      }
      const std::vector<float> in_tile =
          split(input, in_w, in_h, channels, int64_t{tile_w} * in_scale, int64_t{tile_h} * in_scale,
                int64_t{x} * in_scale, int64_t{y} * in_scale);
      KILN_ASSIGN_OR_RETURN(const std::vector<float> out_tile,
                            fn(in_tile, int64_t{tile_w} * in_scale, int64_t{tile_h} * in_scale));
      const int64_t ow = int64_t{tile_w} * out_scale, oh = int64_t{tile_h} * out_scale;
      if (out.empty()) {
        out_channels = static_cast<int64_t>(out_tile.size()) / (ow * oh);
        out.assign(static_cast<size_t>(out_channels * out_w * out_h), 0.0f);
      }
      if (static_cast<int64_t>(out_tile.size()) != out_channels * ow * oh)
        return make_error("tiling: a tile's output holds ", out_tile.size(), " floats, not ", out_channels,
                          " x ", ow, " x ", oh);
      merge(out_tile, ow, oh, out_channels, out, out_w, out_h, int64_t{x} * out_scale, int64_t{y} * out_scale,
            overlap_x * out_scale, overlap_y * out_scale, dx, dy);
    }
  }
  return out;
}

}  // namespace kiln::diffusion
