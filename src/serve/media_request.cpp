#include "serve/media_request.h"

#include <cstdio>

#include "image/data_uri.h"
#include "serve/media_file.h"

namespace kiln::serve {
namespace {

constexpr const char* kNoVision =
    "image input needs a vision projector: start the server with --mmproj FILE (the model's mmproj GGUF)";
constexpr const char* kNoAudio =
    "audio input needs an mmproj with an audio encoder: start the server with --mmproj FILE (the model's mmproj "
    "GGUF, one with clip.has_audio_encoder)";

// What one pixel of an image being decoded may cost: its RGB bytes (3), a JPEG's component planes
// (up to 4) and libjpeg's coefficients of a progressive file (up to 8), rounded up.
constexpr int64_t kDecodeBytesPerPixel = 16;

// Decodes and prepares one image, holding its decode's memory (st.decode_memory) while it runs: an
// image that does not fit beside the decodes in flight is a 503 (retry), one larger than all of
// that memory a 400.
std::optional<HttpError> prepare(const ServerState& st, std::span<const uint8_t> bytes, size_t index,
                                 std::shared_ptr<const PreparedImage>& out) {
  MemoryGate& memory = *st.decode_memory;
  MemoryGate::Lease lease;
  bool busy = false;
  ImageLimits limits;
  limits.admit = [&](int64_t width, int64_t height) {
    const int64_t need = width * height * kDecodeBytesPerPixel;
    if (memory.take(static_cast<size_t>(need), lease)) return ok_status();
    busy = static_cast<size_t>(need) <= memory.capacity();
    auto mib = [](double bytes) {
      char text[32];
      std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1 << 20));
      return std::string(text);
    };
    return Status(make_error("decoding ", width, " x ", height, " pixels takes ", mib(static_cast<double>(need)),
                             " of the ", mib(static_cast<double>(memory.capacity())),
                             " the server gives image decoding", busy ? ", which other requests hold now: retry" : ""));
  };
  auto img = st.vision->prepare_image(bytes, limits);
  if (!img.ok()) return HttpError{busy ? 503 : 400, "image " + std::to_string(index) + ": " + img.error().message};
  out = std::move(*img);
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> read_image_url(const ServerState& st, std::string_view url, size_t index,
                                        std::shared_ptr<const PreparedImage>& out) {
  if (!st.vision) return HttpError{400, kNoVision};
  const std::string name = "image " + std::to_string(index) + ": ";
  if (url.starts_with("file://")) {
    if (st.media_path.empty())
      return HttpError{400, name + "file:// URLs are not allowed unless the server is started with --media-path DIR"};
    auto bytes = read_media_file(st.media_path, url.substr(7), st.max_media_bytes);
    if (!bytes.ok()) return HttpError{400, name + bytes.error().message};
    return prepare(st, std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), index, out);
  }
  if (!url.starts_with("data:")) {
    const bool remote = url.starts_with("http://") || url.starts_with("https://");
    return HttpError{400, name +
                              (remote ? "remote image URLs are not fetched"
                                      : "only data: and file:// URLs are read (no other schemes)") +
                              "; send the image inline as data:image/png;base64,... or data:image/jpeg;base64,..."};
  }
  auto uri = parse_data_uri(url);
  if (!uri.ok()) return HttpError{400, "image " + std::to_string(index) + ": " + uri.error().message};
  return prepare(st, uri->bytes, index, out);
}

std::optional<HttpError> read_audio_data(const ServerState& st, std::string_view data, size_t index,
                                         std::vector<std::shared_ptr<const PreparedAudio>>& out) {
  const std::string name = "audio " + std::to_string(index) + ": ";
  if (!st.audio) return HttpError{400, kNoAudio};
  std::vector<uint8_t> bytes;
  if (data.starts_with("data:")) {
    auto uri = parse_data_uri(data);
    if (!uri.ok()) return HttpError{400, name + uri.error().message};
    bytes = std::move(uri->bytes);
  } else {
    auto decoded = decode_base64(data);
    if (!decoded.ok()) return HttpError{400, name + decoded.error().message};
    bytes = std::move(*decoded);
  }
  auto chunks = st.audio->prepare_audio(bytes);
  if (!chunks.ok()) return HttpError{400, name + chunks.error().message};
  out = std::move(*chunks);
  return std::nullopt;
}

std::optional<HttpError> media_prompt_request(const ServerState& st, const std::string& text,
                                              std::span<const MediaItem> media, bool collapse_bos,
                                              GenerationRequest& out) {
  for (const MediaItem& m : media) {
    if (m.image && !st.vision) return HttpError{400, kNoVision};
    if (!m.image && !st.audio) return HttpError{400, kNoAudio};
  }
  auto mp = tokenize_media_prompt(st.model->tokenizer(), {.vision = st.vision.get(), .audio = st.audio.get()}, text,
                                  media, {.add_special = true, .parse_special = true, .collapse_bos = collapse_bos});
  if (!mp.ok()) return HttpError{400, mp.error().message};
  out.prompt = mp->flat_tokens();
  out.images.clear();
  int64_t pos = 0;
  size_t index = 0, audio_index = 0;
  for (const PromptChunk& chunk : mp->chunks) {
    if (chunk.image) {
      // The engine decodes an image as one batch; one whose tokens see each other both ways is
      // also one micro-batch.
      const int64_t limit = st.vision->markup().non_causal ? std::min(st.ctx->n_batch(), st.ctx->n_ubatch())
                                                           : st.ctx->n_batch();
      if (chunk.image->n_tokens > limit)
        return HttpError{400, "image " + std::to_string(index) + " fills " +
                                  std::to_string(chunk.image->n_tokens) +
                                  " positions, more than a batch of " + std::to_string(limit) +
                                  " (start the server with larger -b and -ub)"};
      auto embd = st.encoder->encode(*chunk.image);
      if (!embd.ok()) return HttpError{500, "image " + std::to_string(index) + ": " + embd.error().message};
      out.images.push_back({static_cast<int32_t>(pos), std::move(*embd)});
      ++index;
    } else if (chunk.audio) {
      // Each 30-second chunk is decoded as one batch, as an image is.
      if (chunk.audio->n_tokens > st.ctx->n_batch())
        return HttpError{400, "an audio chunk fills " + std::to_string(chunk.audio->n_tokens) +
                                  " positions, more than a batch of " + std::to_string(st.ctx->n_batch()) +
                                  " (start the server with a larger -b)"};
      auto embd = st.audio_encoder->encode(*chunk.audio);
      if (!embd.ok())
        return HttpError{500, "audio chunk " + std::to_string(audio_index) + ": " + embd.error().message};
      out.images.push_back({static_cast<int32_t>(pos), std::move(*embd)});
      ++audio_index;
    }
    pos += chunk.n_positions();
  }
  return std::nullopt;
}

std::optional<HttpError> media_prompt_request(const ServerState& st, const std::string& text,
                                              std::span<const std::shared_ptr<const PreparedImage>> images,
                                              bool collapse_bos, GenerationRequest& out) {
  std::vector<MediaItem> media(images.size());
  for (size_t i = 0; i < images.size(); ++i) media[i].image = images[i];
  return media_prompt_request(st, text, media, collapse_bos, out);
}

std::optional<HttpError> parse_prompt_object(const ServerState& st, const json& value, const char* field,
                                             GenerationRequest& out, bool& handled) {
  handled = value.is_object();
  if (!handled) return std::nullopt;
  const std::string f(field);
  auto text = value.find("prompt_string");
  if (text == value.end() || !text->is_string())
    return HttpError{400, "field '" + f + "': an object prompt needs a string 'prompt_string'"};
  std::vector<std::shared_ptr<const PreparedImage>> images;
  if (auto data = value.find("multimodal_data"); data != value.end()) {
    if (!data->is_array())
      return HttpError{400, "field '" + f + ".multimodal_data' must be a list of base64 strings"};
    if (!data->empty() && !st.vision) return HttpError{400, kNoVision};
    for (const json& item : *data) {
      if (!item.is_string())
        return HttpError{400, "field '" + f + ".multimodal_data' must be a list of base64 strings"};
      auto bytes = decode_base64(item.get_ref<const std::string&>());
      if (!bytes.ok())
        return HttpError{400, "image " + std::to_string(images.size()) + ": " + bytes.error().message};
      std::shared_ptr<const PreparedImage> img;
      if (auto e = prepare(st, *bytes, images.size(), img)) return e;
      images.push_back(std::move(img));
    }
  }
  return media_prompt_request(st, text->get_ref<const std::string&>(), images, false, out);
}

}  // namespace kiln::serve
