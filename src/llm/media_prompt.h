// Prompts with images (llama.cpp's mtmd chunks): text tokens and images in order, tokenized and
// decoded as libmtmd does it.
//
// Tokenizing: the text is split at each media marker ("<__media__>", llama.cpp's default); the
// i-th marker stands for the i-th image, and markers and images must be as many. Each text piece is
// tokenized on its own without special tokens added (so SPM vocabularies give each piece its
// leading space, as llama.cpp); each image is wrapped in its projector's markup (gemma3's
// <start_of_image> ... <end_of_image>, special tokens parsed) and fills n_tokens positions; text
// that follows text joins its chunk. With add_special, BOS opens the prompt (a chunk of its own
// when the prompt starts with an image) and EOS closes it, when the vocabulary adds them.
//
// Decoding: text in batches of n_batch tokens; each image encoded (VisionEncoder, cached by
// content) and decoded as one batch of embeddings, non-causal when the projector wants its image
// tokens to see each other both ways (such an image must fit one micro-batch). Positions run on
// through images (one per image token).
//
// Thread-safety: MediaPrompt is a value; the functions are reentrant over distinct contexts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/audio_encoder.h"
#include "llm/vision_encoder.h"
#include "llm/vision_model.h"
#include "text/tokenizer.h"

namespace kiln {

inline constexpr std::string_view kMediaMarker = "<__media__>";
// Stands for an image position in a flat token list (llama.cpp's LLAMA_TOKEN_NULL).
inline constexpr int32_t kMediaToken = -1;

// One piece of a prompt: text tokens, an image, or one 30-second chunk of an audio file.
struct PromptChunk {
  std::vector<int32_t> tokens;                  // a text chunk (non-empty)
  std::shared_ptr<const PreparedImage> image;   // or an image chunk (tokens empty)
  std::shared_ptr<const PreparedAudio> audio;   // or an audio chunk (tokens empty)
  bool is_media() const { return image || audio; }
  int64_t n_positions() const {
    return image ? image->n_tokens : audio ? audio->n_tokens : static_cast<int64_t>(tokens.size());
  }
};

struct MediaPrompt {
  std::vector<PromptChunk> chunks;

  int64_t n_positions() const;
  // The media items it holds: each image, and each audio file once (its first chunk, whose id ends
  // in "#0": see PreparedAudio::id).
  size_t n_media() const;
  // Every position's token, kMediaToken at image positions.
  std::vector<int32_t> flat_tokens() const;
  // Appends text tokens (to the last chunk when it is text).
  void append_text(std::span<const int32_t> tokens);
};

// `text` with one marker per image in front when it has none (images before the text, as
// llama-mtmd-cli places them), else unchanged.
std::string with_media_markers(std::string_view text, size_t n_images);

struct MediaTokenizeOptions {
  bool add_special = true;     // BOS / EOS as the vocabulary wants
  bool parse_special = false;  // control tokens written in the text become their ids
  // A BOS the text starts with (written by a chat template) and the one add_special adds become
  // one, as kiln tokenizes chat prompts (serve's tokenize_chat).
  bool collapse_bos = false;
};

// What one media marker stands for: an image, or an audio file (its chunks, in order; each becomes
// a chunk of the prompt, all between the audio markup's begin and end, as mtmd does).
struct MediaItem {
  std::shared_ptr<const PreparedImage> image;
  std::vector<std::shared_ptr<const PreparedAudio>> audio;
};

// The mmproj's encoders' models a prompt's media need (either may be null when unused).
struct MediaModels {
  const VisionModel* vision = nullptr;
  const AudioModel* audio = nullptr;
};

// Tokenizes `text` with `media` in marker order. Errors: markers and media differ in number;
// images without a vision model, audio without an audio model (the message says which).
Result<MediaPrompt> tokenize_media_prompt(const text::Tokenizer& tok, const MediaModels& models, std::string_view text,
                                          std::span<const MediaItem> media, const MediaTokenizeOptions& options = {});

// Tokenizes `text` with `images` in marker order. `vision` may be null when there are no images
// (then markers are an error). Errors: markers and images differ in number; images without an
// mmproj.
Result<MediaPrompt> tokenize_media_prompt(const text::Tokenizer& tok, const VisionModel* vision, std::string_view text,
                                          std::span<const std::shared_ptr<const PreparedImage>> images,
                                          const MediaTokenizeOptions& options = {});

// Positions that `a` and `b` share from the start: text token by token, an image only whole (same
// content id), so the count never ends inside an image.
int64_t common_prefix(const MediaPrompt& a, const MediaPrompt& b);

struct MediaDecodeOptions {
  int32_t seq = 0;         // the sequence decoded into
  int64_t n_batch = 2048;  // most text tokens per decode call
  AudioEncoder* audio = nullptr;  // encodes the audio chunks (needed when the decoded part has any)
};

// Decodes the positions of `prompt` from `from` on (a position where an image does not start
// inside: see common_prefix) into `ctx` at those positions, with logits for the last position
// only; returns that position's index in the last decode() (read it with ctx.logits()). `encoder`
// may be null when the decoded part holds no image. The context must accept input embeddings when
// it does.
Result<size_t> decode_media_prompt(Context& ctx, VisionEncoder* encoder, const MediaPrompt& prompt, int64_t from,
                                   const MediaDecodeOptions& options = {});

}  // namespace kiln
