#include "llm/audio_model.h"

#include "image/content_id.h"

namespace kiln {

Result<std::shared_ptr<const AudioModel>> AudioModel::load(const std::string& path, const Model& text_model) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error("mmproj: ", file.error().message);
  std::shared_ptr<AudioModel> m(new AudioModel());
  m->file_ = std::move(*file);
  KILN_ASSIGN_OR_RETURN(m->hp_, read_audio_hparams(*m->file_));
  KILN_ASSIGN_OR_RETURN(m->weights_, bind_audio_weights(*m->file_, m->hp_, text_model.hparams().n_embd));
  m->name_ = gguf_display_name(*m->file_, path);
  return std::shared_ptr<const AudioModel>(std::move(m));
}

Result<MmprojEncoders> mmproj_encoders(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error("mmproj: ", file.error().message);
  auto flag = [&](const char* key) {
    auto v = (*file)->find(key) != nullptr ? (*file)->get_bool(key) : Result<bool>(false);
    return v.ok() && *v;
  };
  MmprojEncoders e{.vision = flag("clip.has_vision_encoder"), .audio = flag("clip.has_audio_encoder")};
  if (!e.vision && !e.audio) e.vision = true;
  return e;
}

AudioMarkup AudioModel::markup() const {
  // ref: mtmd_context's aud_beg / aud_end (tools/mtmd/mtmd.cpp).
  switch (hp_.projector) {
    case AudioProjector::Qwen2a:
      return {"<|audio_bos|>", "<|audio_eos|>"};
    case AudioProjector::Voxtral:
      return {"[BEGIN_AUDIO]", ""};
    case AudioProjector::MusicFlamingo:
      return {"<sound>", ""};
    case AudioProjector::Ultravox:
    case AudioProjector::Glma:  // its begin and end are rows of the embeddings (v.boi, v.eoi)
      break;
  }
  return {};
}

Result<std::vector<std::shared_ptr<const PreparedAudio>>> AudioModel::prepare_audio(
    std::span<const uint8_t> bytes, const audio::DecodeOptions& options) const {
  audio::DecodeOptions o = options;
  o.sample_rate = audio::WhisperLogMel::kSampleRate;
  KILN_ASSIGN_OR_RETURN(const std::vector<float> samples, audio::decode_audio(bytes, o));
  KILN_ASSIGN_OR_RETURN(const audio::WhisperLogMel mel, audio::WhisperLogMel::create(static_cast<int32_t>(hp_.n_mel)));
  KILN_ASSIGN_OR_RETURN(std::vector<audio::MelChunk> chunks, mel.chunks(samples));
  const std::string id = content_id(bytes);
  std::vector<std::shared_ptr<const PreparedAudio>> out;
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto p = std::make_shared<PreparedAudio>();
    p->id = id + "#" + std::to_string(i);
    p->n_tokens = hp_.n_output_tokens(chunks[i].n_frames);
    p->mel = std::move(chunks[i]);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kiln
