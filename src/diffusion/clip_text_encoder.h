// ClipTextEncoder: runs a CLIP text model (models/sd/clip_text.h) over kiln's runtime: a graph per
// call planned in a ComputeArena and executed by a Backend; 77 token ids in, one row of n_embd
// floats per token out. encode_prompt turns a prompt into stable-diffusion.cpp's conditioning
// for SD 1.x and 2.x (FrozenCLIPEmbedderWithCustomWords::get_learned_condition): tokens and emphasis
// weights in 77-token chunks, each chunk encoded, weighted with the mean rescale, and the chunks
// concatenated.
//
// Devices and memory: a resident of its device under the owner "sd text encoder"
// (diffusion/device_network.h: its tensors placed there, the device's arena or its own).
// Ownership: shares the weight file; the Backend (and a shared arena) must outlive the encoder.
// Thread-safety: none; one encode at a time (callers sharing an arena hold its turn).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "diffusion/clip_tokenizer.h"
#include "diffusion/device_network.h"
#include "diffusion/model_family.h"
#include "models/sd/clip_text.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class ClipTextEncoder {
 public:
  // Binds the encoder under `prefix` (sd::kSd1TextPrefix for SD 1.x files, sd::kOpenClipTextPrefix
  // for SD 2.x's) in `file`.
  static Result<std::unique_ptr<ClipTextEncoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                         const std::string& prefix, const NetworkPlacement& placement);

  const sd::ClipTextHParams& hparams() const { return weights_.hp; }

  // ids: exactly n_token ids, each below n_vocab (else an Error naming the first bad one).
  // Returns n_token rows of n_embd floats: the hidden states for `clip_skip` (clip_text_layers).
  Result<std::vector<float>> encode_chunk(std::span<const int32_t> ids, int clip_skip);

 private:
  ClipTextEncoder() = default;
  std::unique_ptr<DeviceNetwork> net_;
  std::shared_ptr<const sd::SdWeightFile> file_;
  sd::ClipTextWeights weights_;
};

// SD 1.x / 2.x conditioning: chunks * 77 rows of n_embd floats (c_crossattn), weights applied;
// chunks padded as `family`'s tokenizer pads them (clip_pad_id).
Result<std::vector<float>> encode_prompt(ClipTextEncoder& encoder, const ClipTokenizer& tokenizer,
                                         std::string_view prompt, int clip_skip, ModelFamily family);

}  // namespace kiln::diffusion
