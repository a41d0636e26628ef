#include "media_flags.h"

#include "user_files.h"

namespace kiln::cli {

void MediaFlags::declare(OptionParser& p) {
  p.value({"--mmproj"}, &mmproj, "FILE", "the model's vision encoder and projector (llama.cpp's mmproj GGUF)");
  p.custom({"--image"}, [this](const std::string& v) {
    images.push_back(v);
    return std::string();
  }, "FILE", "a PNG or JPEG image (repeatable; needs --mmproj); placed at each <__media__> in the prompt, else before it");
}

Result<std::shared_ptr<const VisionModel>> MediaFlags::load_vision(const Model& model) const {
  if (mmproj.empty()) {
    if (!images.empty()) return make_error("--image needs --mmproj FILE (the model's vision projector)");
    return std::shared_ptr<const VisionModel>();
  }
  return VisionModel::load(mmproj, model);
}

Result<std::unique_ptr<VisionEncoder>> make_encoder(std::shared_ptr<const VisionModel> vision,
                                                    const ModelContext& mc, const ContextOptions& context,
                                                    const WeightOptions& weights) {
  return VisionEncoder::create(
      std::move(vision), mc.backend(),
      {.flash_attention = context.flash_attention, .arena = &mc.arena(), .weights = weights});
}

Result<std::shared_ptr<const PreparedImage>> read_image(const VisionModel& vision, const std::string& path) {
  auto bytes = read_text_file(path);
  if (!bytes.ok()) return bytes.error();
  auto img = vision.prepare_image(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
  if (!img.ok()) return make_error("'", path, "': ", img.error().message);
  return img;
}

}  // namespace kiln::cli
