// Images on the command line, with llama.cpp's flags: --mmproj FILE (the model's vision encoder
// and projector) and --image FILE (repeatable), for `run` and `chat`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/vision_encoder.h"
#include "model_flags.h"
#include "options.h"

namespace kiln::cli {

struct MediaFlags {
  std::string mmproj;               // empty: no vision
  std::vector<std::string> images;  // in order

  // Declares --mmproj and --image on `p`.
  void declare(OptionParser& p);
  // The mmproj of --mmproj, checked against `model`; null without --mmproj. An error when it
  // cannot be loaded, or when images are given without it.
  Result<std::shared_ptr<const VisionModel>> load_vision(const Model& model) const;
};

// The encoder of `vision` for the context of `mc`, made with `context`: on its device and backend,
// planning in its compute arena, with its attention path; its weights held and prepared with
// `weights` (the model's). `mc` must outlive the encoder.
Result<std::unique_ptr<VisionEncoder>> make_encoder(std::shared_ptr<const VisionModel> vision,
                                                    const ModelContext& mc, const ContextOptions& context,
                                                    const WeightOptions& weights);

// The image file at `path`, prepared for `vision`; errors name the file ("'cat.svg': image: SVG is
// not supported ...").
Result<std::shared_ptr<const PreparedImage>> read_image(const VisionModel& vision, const std::string& path);

}  // namespace kiln::cli
