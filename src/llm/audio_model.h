// AudioModel: the audio encoder of a loaded mmproj (clip.has_audio_encoder: ultravox, qwen2a,
// voxtral, glma, musicflamingo; models/clip/whisper_encoder.h), and PreparedAudio, the chunks of an audio file ready
// for it (decoded to 16 kHz mono by audio/decode.h, cut into 30-second log-mel chunks by
// audio/log_mel.h, as llama.cpp's mtmd does).
//
// Weights stay in the mapped file (views): the mmproj is its own owner of weight memory.
// Thread-safety: immutable after load; shared by any number of encoders and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/log_mel.h"
#include "core/gguf.h"
#include "core/result.h"
#include "llm/model.h"
#include "models/clip/whisper_encoder.h"

namespace kiln {

// One 30-second chunk of an audio file: llama.cpp's mtmd makes each its own run of embeddings.
struct PreparedAudio {
  std::string id;        // content_id() of the file's bytes, then "#" and the chunk's index
  audio::MelChunk mel;   // [n_mel][n_frames]
  int64_t n_tokens = 0;  // prompt positions the chunk fills
};

// What a prompt puts around an audio file's chunks (mtmd's aud_beg / aud_end), tokenized with
// special tokens parsed; empty for none.
struct AudioMarkup {
  std::string begin;
  std::string end;
};

// Which encoders an mmproj file declares (clip.has_vision_encoder, clip.has_audio_encoder; a file
// that declares neither is read as a vision file, as older converters wrote them). Errors: the file
// cannot be opened or parsed ("mmproj: ...").
struct MmprojEncoders {
  bool vision = false;
  bool audio = false;
};
Result<MmprojEncoders> mmproj_encoders(const std::string& path);

class AudioModel {
 public:
  // Loads the audio side of an mmproj for `text_model`: the projector's output width must be the
  // text model's n_embd. Errors: "mmproj: ..." naming the key or tensor, or that the file has no
  // audio encoder.
  static Result<std::shared_ptr<const AudioModel>> load(const std::string& path, const Model& text_model);

  const std::string& name() const { return name_; }  // general.name, else the file name
  const GgufFile& file() const { return *file_; }
  const AudioHParams& hparams() const { return hp_; }
  const AudioWeights& weights() const { return weights_; }
  AudioMarkup markup() const;

  // Decodes a WAV, FLAC or MP3 file's bytes (audio/decode.h; errors read "audio: ...", the
  // caller's input was at fault) and cuts it into the encoder's chunks, at least one.
  Result<std::vector<std::shared_ptr<const PreparedAudio>>> prepare_audio(
      std::span<const uint8_t> bytes, const audio::DecodeOptions& options = {}) const;

 private:
  AudioModel() = default;
  std::string name_;
  std::unique_ptr<GgufFile> file_;
  AudioHParams hp_;
  AudioWeights weights_;
};

}  // namespace kiln
