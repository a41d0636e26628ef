// SdWeightFile: the tensors of a Stable Diffusion model file, whichever format it comes in, as one
// GgufFile with stable-diffusion.cpp's tensor names ("cond_stage_model.transformer.text_model.
// embeddings.token_embedding.weight", "model.diffusion_model.input_blocks.0.0.weight", ...), so
// that the model code binds them with WeightBinder as it binds a language model's.
//
// Formats, told apart by their first bytes (not the file name):
// - GGUF (stable-diffusion.cpp's `convert` output keeps the checkpoint names): mapped and used as is;
// - .safetensors: validated whole (core/safetensors.h), then its F32, F16 and BF16 tensors are
//   packed into a GGUF image in memory (sizes reversed to ggml's innermost-first order, each tensor
//   aligned for the kernels): one copy of the weights in RAM while the file is open. Tensors of
//   other dtypes (CLIP's I64 position_ids, EMA counters: nothing the networks read) are left out,
//   so a network that did need one would name it as missing; more than 4 dimensions is an Error;
// - a PyTorch pickle (.ckpt, .pt, .bin: a zip archive or a raw pickle stream) is refused with a
//   message that says why (unpickling runs code from the file) and how to convert it.
// Anything else is an Error quoting the file's first bytes.
//
// Ownership: owns the mapping or the packed image; views stay valid while the object lives.
// Thread-safety: immutable after open.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/mapped_file.h"
#include "core/result.h"

namespace kiln::sd {

enum class WeightFormat { Gguf, Safetensors };

class SdWeightFile {
 public:
  static Result<std::unique_ptr<SdWeightFile>> open(const std::string& path);
  // The same over caller-owned bytes (tests, fuzzing), which must outlive the object; `label`
  // names them in errors.
  static Result<std::unique_ptr<SdWeightFile>> parse(std::span<const uint8_t> bytes, const std::string& label);

  WeightFormat format() const { return format_; }
  const GgufFile& gguf() const { return *gguf_; }

 private:
  SdWeightFile() = default;
  WeightFormat format_ = WeightFormat::Gguf;
  std::unique_ptr<MappedFile> mapping_;  // open(): the file
  std::vector<uint8_t> packed_;          // safetensors: the GGUF image gguf_ parses
  std::unique_ptr<GgufFile> gguf_;
};

}  // namespace kiln::sd
