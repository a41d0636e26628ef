#include "models/clip/clip_hparams.h"

#include <string_view>

#include "models/clip/audio_hparams.h"

namespace kiln {
namespace {

constexpr int64_t kMaxImageSide = 8192;  // pixels; real encoders take at most a few thousand
constexpr int64_t kMaxWidth = 1 << 16;   // embedding and feed-forward widths
constexpr int64_t kMaxLayers = 1024;

// A required positive integer no larger than `max`.
Result<int64_t> positive(const GgufFile& f, const std::string& key, int64_t max) {
  auto v = f.get_u32(key);
  if (!v.ok()) return make_error("mmproj: ", v.error().message);
  if (*v == 0 || *v > max) return make_error("mmproj: ", key, " = ", *v, " is outside [1, ", max, "]");
  return static_cast<int64_t>(*v);
}

Result<int64_t> optional_positive(const GgufFile& f, const std::string& key, int64_t max, int64_t fallback) {
  if (f.find(key) == nullptr) return fallback;
  return positive(f, key, max);
}

Result<bool> optional_bool(const GgufFile& f, const std::string& key) {
  if (f.find(key) == nullptr) return false;
  auto v = f.get_bool(key);
  if (!v.ok()) return make_error("mmproj: ", v.error().message);
  return *v;
}

Result<std::array<float, 3>> rgb_triple(const GgufFile& f, const std::string& key) {
  auto v = f.get_f32_array(key);
  if (!v.ok()) return make_error("mmproj: ", v.error().message);
  if (v->size() < 3) return make_error("mmproj: ", key, " has ", v->size(), " values, expected 3 (R, G, B)");
  return std::array<float, 3>{(*v)[0], (*v)[1], (*v)[2]};
}

}  // namespace

Result<ClipHParams> read_clip_hparams(const GgufFile& f) {
  ClipHParams hp;
  auto arch = f.get_string("general.architecture");
  if (arch.ok() && *arch != "clip")
    return make_error("mmproj: general.architecture is '", *arch, "', not 'clip' (is this a text model?)");
  KILN_ASSIGN_OR_RETURN(const bool has_vision, optional_bool(f, "clip.has_vision_encoder"));
  if (!has_vision) {
    // An audio-only file: say what its audio encoder is (or why it would be refused anyway).
    auto audio = read_audio_hparams(f);
    if (!audio.ok()) {
      return make_error("mmproj: the file has no vision encoder (clip.has_vision_encoder is absent or false); ",
                        audio.error().message.substr(std::string_view("mmproj: ").size()));
    }
    return make_error("mmproj: the file has no vision encoder; its audio encoder (projector '",
                      audio->projector_name, "', ", audio->n_mel, " mel bins) takes audio (--audio), not images");
  }
  auto proj = f.get_string("clip.projector_type");
  if (!proj.ok()) proj = f.get_string("clip.vision.projector_type");
  if (!proj.ok()) return make_error("mmproj: clip.projector_type is missing");
  hp.projector = *proj;

  KILN_ASSIGN_OR_RETURN(hp.image_size, positive(f, "clip.vision.image_size", kMaxImageSide));
  KILN_ASSIGN_OR_RETURN(hp.patch_size, positive(f, "clip.vision.patch_size", kMaxImageSide));
  if (hp.patch_size > hp.image_size)
    return make_error("mmproj: patch size ", hp.patch_size, " exceeds the image size ", hp.image_size);
  KILN_ASSIGN_OR_RETURN(hp.n_embd, positive(f, "clip.vision.embedding_length", kMaxWidth));
  KILN_ASSIGN_OR_RETURN(hp.n_ff, positive(f, "clip.vision.feed_forward_length", 4 * kMaxWidth));
  KILN_ASSIGN_OR_RETURN(hp.n_layer, positive(f, "clip.vision.block_count", kMaxLayers));
  KILN_ASSIGN_OR_RETURN(hp.n_head, positive(f, "clip.vision.attention.head_count", hp.n_embd));
  KILN_ASSIGN_OR_RETURN(hp.n_head_kv, optional_positive(f, "clip.vision.attention.head_count_kv", hp.n_head, hp.n_head));
  if (hp.n_head % hp.n_head_kv != 0)
    return make_error("mmproj: ", hp.n_head, " attention heads are not a multiple of ", hp.n_head_kv, " key/value heads");
  if (f.find("clip.vision.attention.head_dim") == nullptr && hp.n_embd % hp.n_head != 0)
    return make_error("mmproj: embedding length ", hp.n_embd, " is not a multiple of ", hp.n_head, " heads");
  KILN_ASSIGN_OR_RETURN(hp.head_dim, optional_positive(f, "clip.vision.attention.head_dim", kMaxWidth, hp.n_embd / hp.n_head));
  KILN_ASSIGN_OR_RETURN(hp.projection_dim, optional_positive(f, "clip.vision.projection_dim", kMaxWidth, 0));
  auto eps = f.get_f32("clip.vision.attention.layer_norm_epsilon");
  if (!eps.ok()) return make_error("mmproj: ", eps.error().message);
  if (!(*eps >= 0.0f && *eps < 1.0f)) return make_error("mmproj: layer norm epsilon ", *eps, " is outside [0, 1)");
  hp.eps = *eps;
  KILN_ASSIGN_OR_RETURN(hp.image_mean, rgb_triple(f, "clip.vision.image_mean"));
  KILN_ASSIGN_OR_RETURN(hp.image_std, rgb_triple(f, "clip.vision.image_std"));
  for (float s : hp.image_std) {
    if (!(s != 0.0f)) return make_error("mmproj: clip.vision.image_std has a zero (or NaN) value");
  }
  KILN_ASSIGN_OR_RETURN(const bool gelu, optional_bool(f, "clip.use_gelu"));
  KILN_ASSIGN_OR_RETURN(const bool silu, optional_bool(f, "clip.use_silu"));
  if (gelu && silu) return make_error("mmproj: both clip.use_gelu and clip.use_silu are set");
  hp.ffn_act = gelu ? ClipFfnAct::Gelu : silu ? ClipFfnAct::Silu : ClipFfnAct::GeluQuick;
  KILN_ASSIGN_OR_RETURN(hp.scale_factor, optional_positive(f, "clip.vision.projector.scale_factor", kMaxImageSide, 0));
  return hp;
}

}  // namespace kiln
