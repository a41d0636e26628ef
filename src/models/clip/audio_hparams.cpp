#include "models/clip/audio_hparams.h"

#include "audio/log_mel.h"

namespace kiln {
namespace {

constexpr int64_t kMaxWidth = 1 << 16;  // embedding and feed-forward widths
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxStack = 64;

Result<int64_t> positive(const GgufFile& f, const std::string& key, int64_t max) {
  auto v = f.get_u32(key);
  if (!v.ok()) return make_error("mmproj: ", v.error().message);
  if (*v == 0 || *v > max) return make_error("mmproj: ", key, " = ", *v, " is outside [1, ", max, "]");
  return static_cast<int64_t>(*v);
}

Result<AudioProjector> projector_of(const std::string& name) {
  if (name == "ultravox") return AudioProjector::Ultravox;
  if (name == "qwen2a") return AudioProjector::Qwen2a;
  if (name == "voxtral") return AudioProjector::Voxtral;
  if (name == "glma") return AudioProjector::Glma;
  if (name == "musicflamingo") return AudioProjector::MusicFlamingo;
  return make_error("mmproj: audio projector type '", name,
                    "' is not supported (kiln reads ultravox, qwen2a, voxtral, glma, musicflamingo)");
}

}  // namespace

bool AudioHParams::pools_pairs() const {
  return projector == AudioProjector::Qwen2a || projector == AudioProjector::Voxtral ||
         projector == AudioProjector::MusicFlamingo;
}

bool AudioHParams::stacks_frames() const {
  return projector == AudioProjector::Ultravox || projector == AudioProjector::Voxtral;
}

int64_t AudioHParams::n_output_tokens(int64_t n_frames) const {
  if (projector == AudioProjector::Glma) return n_frames / 2 / stack_factor + 2;  // + its begin and end rows
  int64_t n = n_frames;
  if (stacks_frames()) n = (n + stack_factor - 1) / stack_factor;  // ref: CLIP_ALIGN
  n /= 2;
  if (pools_pairs()) n /= 2;
  return n;
}

Result<AudioHParams> read_audio_hparams(const GgufFile& f) {
  auto arch = f.get_string("general.architecture");
  if (arch.ok() && *arch != "clip")
    return make_error("mmproj: general.architecture is '", *arch, "', not 'clip' (is this a text model?)");
  const GgufValue* has_audio = f.find("clip.has_audio_encoder");
  auto audio = has_audio ? f.get_bool("clip.has_audio_encoder") : Result<bool>(false);
  if (!audio.ok()) return make_error("mmproj: ", audio.error().message);
  if (!*audio)
    return make_error("mmproj: the file has no audio encoder (clip.has_audio_encoder is absent or false)");
  AudioHParams hp;
  auto name = f.get_string("clip.audio.projector_type");
  if (!name.ok()) name = f.get_string("clip.projector_type");
  if (!name.ok()) return make_error("mmproj: clip.projector_type is missing");
  hp.projector_name = *name;
  KILN_ASSIGN_OR_RETURN(hp.projector, projector_of(hp.projector_name));
  KILN_ASSIGN_OR_RETURN(hp.n_mel, positive(f, "clip.audio.num_mel_bins", audio::WhisperLogMel::kMaxMel));
  KILN_ASSIGN_OR_RETURN(hp.n_embd, positive(f, "clip.audio.embedding_length", kMaxWidth));
  KILN_ASSIGN_OR_RETURN(hp.n_ff, positive(f, "clip.audio.feed_forward_length", 4 * kMaxWidth));
  KILN_ASSIGN_OR_RETURN(hp.n_layer, positive(f, "clip.audio.block_count", kMaxLayers));
  KILN_ASSIGN_OR_RETURN(hp.n_head, positive(f, "clip.audio.attention.head_count", hp.n_embd));
  if (hp.n_embd % hp.n_head != 0)
    return make_error("mmproj: embedding length ", hp.n_embd, " is not a multiple of ", hp.n_head, " heads");
  auto eps = f.get_f32("clip.audio.attention.layer_norm_epsilon");
  if (!eps.ok()) return make_error("mmproj: ", eps.error().message);
  if (!(*eps >= 0.0f && *eps < 1.0f))
    return make_error("mmproj: layer norm epsilon ", *eps, " is outside [0, 1)");
  hp.eps = *eps;
  // ref: clip.cpp's load_hparams requires the key of ultravox, voxtral and glma; qwen2a and
  // musicflamingo do not stack.
  if (hp.stacks_frames() || hp.projector == AudioProjector::Glma) {
    KILN_ASSIGN_OR_RETURN(hp.stack_factor, positive(f, "clip.audio.projector.stack_factor", kMaxStack));
  }
  return hp;
}

}  // namespace kiln
