// Model: a loaded GGUF language model: its mapping, hyperparameters, bound weights and tokenizer.
// Loading copies nothing: weights() are plain views into the mmap'd file, the source every
// placement on a device is prepared from (llm/device_weights.h); contexts compute with a
// DeviceWeights, never with these views directly.
// Thread-safety: immutable after load; shared by any number of contexts (shared_ptr).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "core/gguf.h"
#include "models/hparams.h"
#include "models/modules.h"
#include "text/tokenizer.h"

namespace kiln::grammar {
class GrammarVocab;
}

namespace kiln {

// general.name of a GGUF file, else the file name of `path` without its folder.
std::string gguf_display_name(const GgufFile& file, const std::string& path);

class Model {
 public:
  static Result<std::shared_ptr<const Model>> load(const std::string& path);
  // A model over GGUF bytes that outlive it (e.g. one embedded in the executable); `name` is
  // what path() reports.
  static Result<std::shared_ptr<const Model>> from_memory(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& path() const { return path_; }
  // general.name, else the file name without its folder.
  const std::string& name() const { return name_; }
  const GgufFile& file() const { return *file_; }
  const HParams& hparams() const { return hp_; }
  // Plain views into the mapping (host memory).
  const DecoderWeights& weights() const { return weights_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  // Bytes of tensor data in the file.
  size_t weight_bytes() const;
  // The vocabulary as grammar-constrained sampling sees it: built on first use (a walk over
  // every token's piece), then shared. Thread-safe.
  std::shared_ptr<const grammar::GrammarVocab> grammar_vocab() const;

 private:
  Model() = default;
  static Result<std::shared_ptr<const Model>> bind(std::unique_ptr<GgufFile> file, const std::string& path);
  std::string path_, name_;
  std::unique_ptr<GgufFile> file_;
  HParams hp_;
  DecoderWeights weights_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  mutable std::once_flag grammar_vocab_once_;
  mutable std::shared_ptr<const grammar::GrammarVocab> grammar_vocab_;
};

}  // namespace kiln
