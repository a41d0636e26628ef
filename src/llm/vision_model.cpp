#include "llm/vision_model.h"

#include "image/content_id.h"

namespace kiln {

Result<std::shared_ptr<const VisionModel>> VisionModel::load(const std::string& path, const Model& text_model) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error("mmproj: ", file.error().message);
  return bind(std::move(*file), path, text_model);
}

Result<std::shared_ptr<const VisionModel>> VisionModel::from_memory(std::span<const uint8_t> bytes,
                                                                    const std::string& name, const Model& text_model) {
  auto file = GgufFile::parse(bytes);
  if (!file.ok()) return make_error("mmproj: ", file.error().message);
  return bind(std::move(*file), name, text_model);
}

Result<std::shared_ptr<const VisionModel>> VisionModel::bind(std::unique_ptr<GgufFile> file, const std::string& path,
                                                             const Model& text_model) {
  std::shared_ptr<VisionModel> m(new VisionModel());
  m->path_ = path;
  m->file_ = std::move(file);
  KILN_ASSIGN_OR_RETURN(const ClipHParams hp, read_clip_hparams(*m->file_));
  KILN_ASSIGN_OR_RETURN(m->projector_, make_projector(*m->file_, hp));
  const int64_t n_text = text_model.hparams().n_embd;
  if (m->projector_->n_embd_out() != n_text)
    return make_error("mmproj: the projector outputs embeddings of width ", m->projector_->n_embd_out(),
                      " but the text model '", text_model.name(), "' has n_embd ", n_text,
                      " (is this the mmproj of another model?)");
  m->name_ = gguf_display_name(*m->file_, path);
  return std::shared_ptr<const VisionModel>(std::move(m));
}

size_t VisionModel::weight_bytes() const {
  size_t total = 0;
  for (const auto& t : file_->tensors()) total += t.size;
  return total;
}

Result<std::shared_ptr<const PreparedImage>> VisionModel::prepare_image(std::span<const uint8_t> bytes,
                                                                        const ImageLimits& limits) const {
  KILN_ASSIGN_OR_RETURN(const RgbImage image, decode_image(bytes, limits));
  return prepare_image(image, content_id(bytes));
}

std::shared_ptr<const PreparedImage> VisionModel::prepare_image(const RgbImage& image, std::string id) const {
  auto p = std::make_shared<PreparedImage>();
  p->id = std::move(id);
  p->source_width = image.width;
  p->source_height = image.height;
  p->pixels = projector_->prepare(image);
  p->n_tokens = projector_->n_tokens(p->pixels);
  return p;
}

}  // namespace kiln
