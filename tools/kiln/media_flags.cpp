#include "media_flags.h"

#include "user_files.h"

namespace kiln::cli {

void EncoderDeviceFlags::declare(OptionParser& p) {
  p.custom({"-mmdev", "--mmproj-device"}, [this](const std::string& v) { return parse_one_device(v, &device); },
           "NAME", "device of the mmproj's encoders (none: the CPU; default: the model's --device)");
  p.flag({"--no-mmproj-offload"}, &no_offload, "run the mmproj's encoders on the CPU (as -mmdev none)");
}

void MediaFlags::declare(OptionParser& p, bool audio_flags) {
  p.value({"--mmproj"}, &mmproj, "FILE", "the model's vision and/or audio encoder and projector (llama.cpp's mmproj GGUF)");
  encoder_device_flags.declare(p);
  p.custom({"--image"}, [this](const std::string& v) {
    images.push_back(v);
    order_is_audio.push_back(false);
    return std::string();
  }, "FILE", "a PNG or JPEG image (repeatable; needs --mmproj); placed at each <__media__> in the prompt, else before it");
  if (!audio_flags) return;
  p.custom({"--audio"}, [this](const std::string& v) {
    audio.push_back(v);
    order_is_audio.push_back(true);
    return std::string();
  }, "FILE", "a WAV, FLAC or MP3 file (repeatable; needs an --mmproj with an audio encoder); placed as --image is");
  p.value({"--max-audio-seconds"}, &max_audio_seconds, "S", "longer audio files are refused (default 1800)",
          FloatRange::greater_than(0));
}

Result<std::shared_ptr<const AudioModel>> MediaFlags::load_audio(const Model& model) const {
  if (audio.empty()) return std::shared_ptr<const AudioModel>();
  if (mmproj.empty()) return make_error("--audio needs --mmproj FILE (the model's audio projector)");
  return AudioModel::load(mmproj, model);
}

Result<MediaModelsOwned> MediaFlags::load_declared(const Model& model) const {
  MediaModelsOwned out;
  if (mmproj.empty()) {
    if (!images.empty()) return make_error("--image needs --mmproj FILE (the model's vision projector)");
    if (!audio.empty()) return make_error("--audio needs --mmproj FILE (the model's audio projector)");
    return out;
  }
  KILN_ASSIGN_OR_RETURN(const MmprojEncoders has, mmproj_encoders(mmproj));
  if (has.vision) {
    KILN_ASSIGN_OR_RETURN(out.vision, VisionModel::load(mmproj, model));
  }
  if (has.audio) {
    KILN_ASSIGN_OR_RETURN(out.audio, AudioModel::load(mmproj, model));
  }
  if (!images.empty() && !out.vision) return make_error("--image: '", mmproj, "' has no vision encoder");
  if (!audio.empty() && !out.audio) return make_error("--audio: '", mmproj, "' has no audio encoder");
  return out;
}

Result<std::vector<MediaItem>> MediaFlags::read_media(const VisionModel* vision, const AudioModel* audio_model) const {
  std::vector<MediaItem> items;
  size_t i_image = 0, i_audio = 0;
  for (const bool is_audio : order_is_audio) {
    MediaItem item;
    if (is_audio) {
      KILN_ASSERT(audio_model != nullptr, "read_media: audio without an audio model");
      auto a = read_audio(*audio_model, audio[i_audio++], max_audio_seconds);
      if (!a.ok()) return make_error("--audio: ", a.error().message);
      item.audio = std::move(*a);
    } else {
      KILN_ASSERT(vision != nullptr, "read_media: an image without a vision model");
      auto img = read_image(*vision, images[i_image++]);
      if (!img.ok()) return make_error("--image: ", img.error().message);
      item.image = std::move(*img);
    }
    items.push_back(std::move(item));
  }
  return items;
}

Result<std::shared_ptr<const VisionModel>> MediaFlags::load_vision(const Model& model) const {
  if (mmproj.empty()) {
    if (!images.empty()) return make_error("--image needs --mmproj FILE (the model's vision projector)");
    return std::shared_ptr<const VisionModel>();
  }
  if (images.empty() && !audio.empty()) return std::shared_ptr<const VisionModel>();
  return VisionModel::load(mmproj, model);
}

EncoderOptions MediaFlags::encoder_options(const ModelContext& mc, Device& on, const ContextOptions& context,
                                           const WeightOptions& weights) const {
  return {.flash_attention = context.flash_attention, .arena = &mc.devices->arena(on), .weights = weights};
}

Result<std::unique_ptr<VisionEncoder>> MediaFlags::vision_encoder(std::shared_ptr<const VisionModel> model,
                                                                  const ModelContext& mc,
                                                                  const ContextOptions& context,
                                                                  const WeightOptions& weights,
                                                                  size_t cache_entries) const {
  KILN_ASSIGN_OR_RETURN(Device * on,
                        encoder_device(*mc.devices, encoder_device_flags.resolved(), mc.weights->device()));
  EncoderOptions o = encoder_options(mc, *on, context, weights);
  o.cache_entries = cache_entries;
  return VisionEncoder::create(std::move(model), mc.devices->backend(*on), o);
}

Result<std::unique_ptr<AudioEncoder>> MediaFlags::audio_encoder(std::shared_ptr<const AudioModel> model,
                                                                const ModelContext& mc, const ContextOptions& context,
                                                                const WeightOptions& weights) const {
  KILN_ASSIGN_OR_RETURN(Device * on,
                        encoder_device(*mc.devices, encoder_device_flags.resolved(), mc.weights->device()));
  return AudioEncoder::create(std::move(model), mc.devices->backend(*on), encoder_options(mc, *on, context, weights));
}

Result<std::shared_ptr<const PreparedImage>> read_image(const VisionModel& vision, const std::string& path) {
  auto bytes = read_text_file(path);
  if (!bytes.ok()) return bytes.error();
  auto img = vision.prepare_image(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
  if (!img.ok()) return make_error("'", path, "': ", img.error().message);
  return img;
}

Result<std::vector<std::shared_ptr<const PreparedAudio>>> read_audio(const AudioModel& model, const std::string& path,
                                                                     float max_seconds) {
  auto bytes = read_text_file(path);
  if (!bytes.ok()) return bytes.error();
  audio::DecodeOptions o;
  o.max_seconds = max_seconds;
  auto a = model.prepare_audio(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), o);
  if (!a.ok()) return make_error("'", path, "': ", a.error().message);
  return a;
}

}  // namespace kiln::cli
