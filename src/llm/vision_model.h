// VisionModel: a loaded mmproj, llama.cpp's GGUF of a vision encoder and its projector
// (`--mmproj FILE`): the mapping, hyperparameters, bound weights and the Projector
// (models/clip/projector.h). It also turns image files into PreparedImages, which prompts carry
// until an encoder runs them (llm/vision_encoder.h).
//
// Weights stay in the mapped file (views, as the text model's): the mmproj is its own owner of
// weight memory, apart from the text model's.
// Thread-safety: immutable after load; shared by any number of encoders and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/gguf.h"
#include "core/result.h"
#include "image/decode.h"
#include "llm/model.h"
#include "models/clip/projector.h"

namespace kiln {

// An image ready for an encoder: decoded, then resized / padded by the projector.
struct PreparedImage {
  std::string id;                  // content_id() of the file's bytes: equal bytes, equal id
  int32_t source_width = 0;        // as decoded
  int32_t source_height = 0;
  RgbImage pixels;                 // as the encoder takes it
  int64_t n_tokens = 0;            // prompt positions the image fills
};

class VisionModel {
 public:
  // Loads an mmproj for `text_model`: the projector's output width must be the text model's
  // n_embd. Errors: "mmproj: ..." naming the key, tensor or the unsupported projector type.
  static Result<std::shared_ptr<const VisionModel>> load(const std::string& path, const Model& text_model);
  // The same over GGUF bytes that outlive the model.
  static Result<std::shared_ptr<const VisionModel>> from_memory(std::span<const uint8_t> bytes, const std::string& name,
                                                                const Model& text_model);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }  // general.name, else the file name
  const GgufFile& file() const { return *file_; }
  const ClipHParams& hparams() const { return projector_->hparams(); }
  const Projector& projector() const { return *projector_; }
  ImageMarkup markup() const { return projector_->markup(); }
  size_t weight_bytes() const;

  // Decodes a PNG or JPEG file's bytes and prepares the image for this encoder. Errors read
  // "image: ..." (image/decode.h); the caller's input was at fault, the model stays usable.
  Result<std::shared_ptr<const PreparedImage>> prepare_image(std::span<const uint8_t> bytes,
                                                             const ImageLimits& limits = {}) const;
  // The same for an image already decoded; `id` names it (content_id of its file).
  std::shared_ptr<const PreparedImage> prepare_image(const RgbImage& image, std::string id) const;

 private:
  VisionModel() = default;
  static Result<std::shared_ptr<const VisionModel>> bind(std::unique_ptr<GgufFile> file, const std::string& path,
                                                         const Model& text_model);
  std::string path_, name_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Projector> projector_;
};

}  // namespace kiln
