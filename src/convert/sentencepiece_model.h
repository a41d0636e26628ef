// Reads a SentencePiece tokenizer.model: the protobuf ModelProto, parsed here without protoc.
// ref: sentencepiece/src/sentencepiece_model.proto (ModelProto.pieces = 1, trainer_spec = 2,
// normalizer_spec = 3; SentencePiece.piece = 1, score = 2, type = 3; TrainerSpec.model_type = 3,
// byte_fallback = 35; NormalizerSpec.name = 1, add_dummy_prefix = 3,
// remove_extra_whitespaces = 4). Unknown fields are skipped as protobuf requires; every length
// and varint is bounds-checked, so a hostile file gets an Error, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace kiln::convert {

// SentencePiece's piece types (ModelProto.SentencePiece.Type); the numbers are the GGUF
// tokenizer.ggml.token_type values too.
enum class SpmPieceType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct SpmPiece {
  std::string piece;
  float score = 0.0f;
  SpmPieceType type = SpmPieceType::Normal;
};

struct SpmModel {
  std::vector<SpmPiece> pieces;
  int32_t model_type = 1;  // TrainerSpec.ModelType: 1 unigram, 2 bpe, 3 word, 4 char
  bool byte_fallback = false;
  std::string normalizer_name;  // "identity", "nmt_nfkc", ...; empty when absent
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
};

// Parses the bytes of a tokenizer.model; `label` names it in errors.
Result<SpmModel> parse_spm_model(std::span<const uint8_t> bytes, const std::string& label);

}  // namespace kiln::convert
