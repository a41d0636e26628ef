#include "llm/media_prompt.h"

#include <algorithm>
#include <string>

namespace kiln {

int64_t MediaPrompt::n_positions() const {
  int64_t n = 0;
  for (const PromptChunk& c : chunks) n += c.n_positions();
  return n;
}

size_t MediaPrompt::n_media() const {
  return static_cast<size_t>(std::count_if(chunks.begin(), chunks.end(), [](const PromptChunk& c) {
    return c.image != nullptr || (c.audio != nullptr && c.audio->id.ends_with("#0"));
  }));
}

std::vector<int32_t> MediaPrompt::flat_tokens() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n_positions()));
  for (const PromptChunk& c : chunks) {
    if (c.is_media()) {
      out.insert(out.end(), static_cast<size_t>(c.n_positions()), kMediaToken);
    } else {
      out.insert(out.end(), c.tokens.begin(), c.tokens.end());
    }
  }
  return out;
}

void MediaPrompt::append_text(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  if (chunks.empty() || chunks.back().is_media()) chunks.emplace_back();
  chunks.back().tokens.insert(chunks.back().tokens.end(), tokens.begin(), tokens.end());
}

std::string with_media_markers(std::string_view text, size_t n_images) {
  std::string out;
  if (text.find(kMediaMarker) == std::string_view::npos) {
    for (size_t i = 0; i < n_images; ++i) out += kMediaMarker;
  }
  out += text;
  return out;
}

Result<MediaPrompt> tokenize_media_prompt(const text::Tokenizer& tok, const MediaModels& models, std::string_view text,
                                          std::span<const MediaItem> media, const MediaTokenizeOptions& options) {
  // ref: mtmd_tokenizer (tools/mtmd/mtmd.cpp): split_text, add_text, add_media, then BOS / EOS.
  size_t n_markers = 0;
  for (size_t p = text.find(kMediaMarker); p != std::string_view::npos; p = text.find(kMediaMarker, p + kMediaMarker.size()))
    ++n_markers;
  if (n_markers != media.size())
    return make_error("prompt: ", n_markers, " media markers (", kMediaMarker, ") for ", media.size(),
                      " images and audio files: each needs one marker where it goes");
  for (const MediaItem& m : media) {
    if (m.image && models.vision == nullptr) return make_error("prompt: images need a vision model (--mmproj)");
    if (!m.image && models.audio == nullptr)
      return make_error("prompt: audio needs an mmproj with an audio encoder (--mmproj)");
  }
  MediaPrompt prompt;
  auto add_text = [&](std::string_view piece, bool parse_special) {
    if (piece.empty()) return;
    prompt.append_text(tok.tokenize(piece, /*add_special=*/false, parse_special));
  };
  size_t start = 0, i_media = 0;
  while (true) {
    const size_t p = text.find(kMediaMarker, start);
    add_text(text.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start), options.parse_special);
    if (p == std::string_view::npos) break;
    const MediaItem& item = media[i_media++];
    if (item.image) {
      const ImageMarkup markup = models.vision->markup();
      add_text(markup.begin, true);
      PromptChunk chunk;
      chunk.image = item.image;
      prompt.chunks.push_back(std::move(chunk));
      add_text(markup.end, true);
    } else {
      const AudioMarkup markup = models.audio->markup();
      add_text(markup.begin, true);
      for (const auto& a : item.audio) {
        PromptChunk chunk;
        chunk.audio = a;
        prompt.chunks.push_back(std::move(chunk));
      }
      add_text(markup.end, true);
    }
    start = p + kMediaMarker.size();
  }
  if (options.add_special && tok.add_bos()) {
    const int32_t bos = tok.bos();
    if (!prompt.chunks.empty() && !prompt.chunks.front().is_media()) {
      std::vector<int32_t>& first = prompt.chunks.front().tokens;
      if (!(options.collapse_bos && first.front() == bos)) first.insert(first.begin(), bos);
    } else {
      PromptChunk chunk;
      chunk.tokens.push_back(bos);
      prompt.chunks.insert(prompt.chunks.begin(), std::move(chunk));
    }
  }
  if (options.add_special && tok.add_eos()) {
    const int32_t eos = tok.eos();
    prompt.append_text(std::span(&eos, 1));
  }
  return prompt;
}

Result<MediaPrompt> tokenize_media_prompt(const text::Tokenizer& tok, const VisionModel* vision, std::string_view text,
                                          std::span<const std::shared_ptr<const PreparedImage>> images,
                                          const MediaTokenizeOptions& options) {
  std::vector<MediaItem> media(images.size());
  for (size_t i = 0; i < images.size(); ++i) media[i].image = images[i];
  return tokenize_media_prompt(tok, MediaModels{.vision = vision}, text, media, options);
}

int64_t common_prefix(const MediaPrompt& a, const MediaPrompt& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.chunks.size() && i < b.chunks.size(); ++i) {
    const PromptChunk& x = a.chunks[i];
    const PromptChunk& y = b.chunks[i];
    if (x.is_media() || y.is_media()) {
      const bool same = x.image ? y.image && x.image->id == y.image->id && x.image->n_tokens == y.image->n_tokens
                        : x.audio ? y.audio && x.audio->id == y.audio->id && x.audio->n_tokens == y.audio->n_tokens
                                  : false;
      if (!same) return n;
      n += x.n_positions();
      continue;
    }
    const size_t m = std::min(x.tokens.size(), y.tokens.size());
    size_t k = 0;
    while (k < m && x.tokens[k] == y.tokens[k]) ++k;
    n += static_cast<int64_t>(k);
    if (k < x.tokens.size() || k < y.tokens.size()) return n;
  }
  return n;
}

Result<size_t> decode_media_prompt(Context& ctx, VisionEncoder* encoder, const MediaPrompt& prompt, int64_t from,
                                   const MediaDecodeOptions& options) {
  const int64_t total = prompt.n_positions();
  KILN_ASSERT(from >= 0 && from < total && options.n_batch > 0, "decode_media_prompt: nothing to decode");
  Batch batch;
  int64_t pos = 0;  // the first position of the chunk at hand
  for (const PromptChunk& chunk : prompt.chunks) {
    const int64_t n = chunk.n_positions();
    if (pos + n <= from) {
      pos += n;
      continue;
    }
    if (chunk.is_media()) {
      if (pos < from) return make_error("prompt: decoding cannot start inside an image or audio (position ", from, ")");
      std::shared_ptr<const ImageEmbeddings> embd;
      if (chunk.image) {
        if (encoder == nullptr) return make_error("prompt: images need a vision encoder (--mmproj)");
        KILN_ASSIGN_OR_RETURN(embd, encoder->encode(*chunk.image));
      } else {
        if (options.audio == nullptr) return make_error("prompt: audio needs an audio encoder (--mmproj)");
        KILN_ASSIGN_OR_RETURN(embd, options.audio->encode(*chunk.audio));
      }
      // ref: mtmd_helper_decode_image_chunk: batches of n_batch; an image whose tokens see each
      // other both ways goes in one (the context refuses it when it exceeds n_batch or n_ubatch).
      const int64_t step = embd->non_causal ? embd->n_tokens : options.n_batch;
      for (int64_t t0 = 0; t0 < embd->n_tokens; t0 += step) {
        batch.clear();
        batch.causal = !embd->non_causal;
        for (int64_t t = t0; t < std::min(embd->n_tokens, t0 + step); ++t)
          batch.add_embedding(embd->row(t), static_cast<int32_t>(pos + t), options.seq, pos + t + 1 == total);
        KILN_TRY(ctx.decode(batch));
      }
    } else {
      for (int64_t i = std::max<int64_t>(0, from - pos); i < n; i += options.n_batch) {
        const int64_t end = std::min(n, i + options.n_batch);
        batch.clear();
        for (int64_t k = i; k < end; ++k)
          batch.add(chunk.tokens[static_cast<size_t>(k)], static_cast<int32_t>(pos + k), options.seq, pos + k + 1 == total);
      KILN_TRY(ctx.decode(batch));
      }
    }
    pos += n;
  }
  return batch.size() - 1;
}

}  // namespace kiln
