#include "diffusion/clip_text_encoder.h"

#include "diffusion/clip_prompt.h"
#include "diffusion/conditioning_math.h"

namespace kiln::diffusion {

Result<std::unique_ptr<ClipTextEncoder>> ClipTextEncoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                                 const std::string& prefix,
                                                                 const NetworkPlacement& placement) {
  std::unique_ptr<ClipTextEncoder> e(new ClipTextEncoder());
  KILN_ASSIGN_OR_RETURN(e->weights_, sd::bind_clip_text(file->gguf(), prefix));
  KILN_ASSIGN_OR_RETURN(
      e->net_, DeviceNetwork::create("sd text encoder", file,
                                     {prefix + "."}, placement));
  e->file_ = std::move(file);
  return e;
}

Result<std::vector<float>> ClipTextEncoder::encode_chunk(std::span<const int32_t> ids, int clip_skip) {
  const sd::ClipTextHParams& hp = weights_.hp;
  if (static_cast<int64_t>(ids.size()) != hp.n_token)
    return make_error("sd text encoder: a chunk holds ", hp.n_token, " token ids, got ", ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= hp.n_vocab)
      return make_error("sd text encoder: token id ", ids[i], " at position ", i,
                        " is outside the vocabulary [0, ", hp.n_vocab, ")");
  }
  KILN_ASSIGN_OR_RETURN(const int64_t n_layers, sd::clip_text_layers(hp, clip_skip));
  Graph g;
  const Tensor in = g.input("ids", DType::I32, {hp.n_token, 1, 1, 1});
  const Tensor out = sd::clip_text_graph(g, weights_, in, n_layers);
  g.mark_output(out);
  std::vector<int32_t> host_ids(ids.begin(), ids.end());
  const PassInput inputs[] = {{in, host_ids.data()}};
  return net_->run(g, inputs, out);  // [n_embd, n_token]
}

Result<std::vector<float>> encode_prompt(ClipTextEncoder& encoder, const ClipTokenizer& tokenizer,
                                         std::string_view prompt, int clip_skip, ModelFamily family) {
  KILN_ASSIGN_OR_RETURN(const ClipPromptTokens tokens,
                        tokenize_prompt(tokenizer, prompt, clip_pad_id(family)));
  const size_t n = kClipChunkTokens;
  std::vector<float> cond;
  for (size_t c = 0; c < tokens.ids.size(); c += n) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> hidden,
                          encoder.encode_chunk(std::span(tokens.ids).subspan(c, n), clip_skip));
    apply_token_weights(hidden, std::span(tokens.weights).subspan(c, n));
    cond.insert(cond.end(), hidden.begin(), hidden.end());
  }
  return cond;
}

}  // namespace kiln::diffusion
