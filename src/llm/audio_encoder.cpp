#include "llm/audio_encoder.h"

namespace kiln {

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::create(std::shared_ptr<const AudioModel> model,
                                                           Backend& backend,
                                                           const AudioEncoderOptions& options) {
  std::unique_ptr<AudioEncoder> e(new AudioEncoder());
  e->model_ = std::move(model);
  e->attention_ =
      options.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  KILN_ASSIGN_OR_RETURN(
      e->core_, MediaEncoder::create(
                    std::shared_ptr<const GgufFile>(e->model_, &e->model_->file()),
                    "mmproj " + e->model_->name() + " (audio)", "audio encoder", backend, options,
                    [&](Graph& g) { return e->build(g, audio::WhisperLogMel::kChunkFrames, nullptr); }));
  return e;
}

Result<EncoderPass> AudioEncoder::build(Graph& g, int64_t n_frames, const float* mel) const {
  KILN_ASSIGN_OR_RETURN(const AudioEncoderGraph eg,
                        build_audio_encoder(g, model_->hparams(), model_->weights(), n_frames, attention_));
  return EncoderPass{.inputs = {{eg.mel, mel}}, .embeddings = eg.embeddings};
}

Result<std::shared_ptr<const ImageEmbeddings>> AudioEncoder::encode(const PreparedAudio& chunk) {
  return core_->encode(chunk.id, chunk.n_tokens, false,
                       [&](Graph& g) { return build(g, chunk.mel.n_frames, chunk.mel.data.data()); });
}

}  // namespace kiln
