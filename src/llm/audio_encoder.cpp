#include "llm/audio_encoder.h"

namespace kiln {

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::create(std::shared_ptr<const AudioModel> model, Backend& backend,
                                                           FlashAttention flash_attention, ComputeArena* turn) {
  Device& dev = backend.device();
  if (!dev.is_host())
    return make_error("audio encoder: the device '", dev.name(),
                      "' is not the host: kiln's audio encoder runs on the CPU only (issue 36)");
  std::unique_ptr<AudioEncoder> e(new AudioEncoder());
  e->model_ = std::move(model);
  e->backend_ = &backend;
  e->turn_ = turn;
  e->attention_ = flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  e->arena_ = std::make_unique<ComputeArena>(dev, "audio " + e->model_->name());
  Graph worst;
  const auto eg = build_audio_encoder(worst, e->model_->hparams(), e->model_->weights(),
                                      audio::WhisperLogMel::kChunkFrames, e->attention_);
  if (!eg.ok()) return eg.error();
  KILN_TRY(e->arena_->reserve(worst));
  KILN_TRY(e->arena_->allocate());
  return e;
}

Result<std::shared_ptr<const ImageEmbeddings>> AudioEncoder::encode(const PreparedAudio& chunk) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_lock<std::mutex> turn;
  if (turn_ != nullptr) turn = turn_->take_turn();
  Graph g;
  KILN_ASSIGN_OR_RETURN(const AudioEncoderGraph eg, build_audio_encoder(g, model_->hparams(), model_->weights(),
                                                                        chunk.mel.n_frames, attention_));
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena_->plan(g));
  KILN_TRY(backend_->prepare(plan));
  // The host device reads the input in place: the chunk outlives the execution.
  KILN_TRY(plan.bind(eg.mel, contiguous_view(DType::F32, {chunk.mel.n_frames, chunk.mel.n_mel, 1, 1},
                                             const_cast<float*>(chunk.mel.data.data()))));
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();
  const TensorView out = plan.view(eg.embeddings);  // [n_embd, n_tokens]
  auto e = std::make_shared<ImageEmbeddings>();
  e->id = chunk.id;
  e->n_embd = out.ne[0];
  e->n_tokens = out.ne[1];
  e->data.resize(static_cast<size_t>(out.nelements()));
  KILN_TRY(backend_->device().download(out, e->data.data(), out.span_bytes()));
  if (e->n_tokens != chunk.n_tokens)
    return make_error("audio encoder: the graph made ", e->n_tokens, " tokens, the prompt holds ", chunk.n_tokens);
  return std::shared_ptr<const ImageEmbeddings>(std::move(e));
}

}  // namespace kiln
