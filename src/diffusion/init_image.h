// The init image of image to image brought to the size asked (-W, -H), as sd-cli loads it
// (load_image_common in stable-diffusion.cpp's examples/common/media_io.cpp, 97d2990): an image of
// another aspect ratio is first cropped about its centre to the asked ratio (the crop's side
// truncated toward zero), then resized with a box filter in linear light (sd-cli's stb_image_resize
// call: STBIR_FILTER_BOX, sRGB colour space). Each output pixel averages the input pixels its own
// area covers, weighted by the overlap (an enlargement repeats pixels, blending where an output
// pixel straddles two); the sRGB decode and encode are the standard curves, rounded to nearest, so
// a pixel may differ by 1 from stb_image_resize's table-driven encode.
// Thread-safety: pure function.
#pragma once

#include <cstdint>

#include "image/image.h"

namespace kiln::diffusion {

// `src` (non-empty) cropped and resized to width x height (both >= 1); a copy when it has that size.
RgbImage fit_init_image(const RgbImage& src, int32_t width, int32_t height);

}  // namespace kiln::diffusion
