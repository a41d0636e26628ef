// Projector: one kind of mmproj (clip.projector_type), from an image to embeddings in the text
// model's space. A projector decides how an image is prepared (resized, padded), how many tokens
// it becomes, the text around it in a prompt, whether its tokens attend both ways in the decoder,
// and the encoder graph (usually the shared ViT of models/clip/vit.h plus its own head).
//
// Each projector is one file (projector_<name>.cpp) with a factory listed in projectors.cpp;
// make_projector refuses a type that has none, naming it.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "image/image.h"
#include "models/clip/clip_hparams.h"
#include "models/clip/vit.h"
#include "runtime/graph.h"

namespace kiln {

// What a prompt puts around each image (mtmd's img_beg / img_end), tokenized with special tokens
// parsed, and how the decoder attends within the image.
struct ImageMarkup {
  std::string begin;         // e.g. "<start_of_image>"; empty for none
  std::string end;           // e.g. "<end_of_image>"
  bool non_causal = false;   // the image's tokens see each other both ways (gemma3)
};

// An integer input of an encoder graph whose values depend only on the image size (positions).
struct ConstantInput {
  Tensor tensor;
  std::vector<int32_t> values;
};

// The encoder graph for one prepared image.
struct EncoderGraph {
  Tensor patches;  // F32 [3 * patch^2, n_patches], filled with image_to_patches()
  std::vector<ConstantInput> constants;
  Tensor embeddings;  // F32 [n_embd_out, n_tokens], marked as output
};

class Projector {
 public:
  virtual ~Projector() = default;

  virtual std::string_view name() const = 0;
  const ClipHParams& hparams() const { return hp_; }
  // Width of the embeddings: the text model's n_embd.
  virtual int64_t n_embd_out() const = 0;
  virtual ImageMarkup markup() const = 0;
  // A decoded image brought to what the encoder takes (8-bit, e.g. resized and padded to a square).
  virtual RgbImage prepare(const RgbImage& image) const = 0;
  // Tokens an image prepared by prepare() becomes.
  virtual int64_t n_tokens(const RgbImage& prepared) const = 0;
  // The size of the prepared image that makes the largest graph (for sizing memory at load).
  virtual std::pair<int32_t, int32_t> worst_case_size() const = 0;
  // Adds the encoder for a prepared image of `width` x `height` to `g` (empty).
  virtual Result<EncoderGraph> build(Graph& g, int32_t width, int32_t height, AttentionPath attention) const = 0;

 protected:
  Projector(ClipHParams hp, VitWeights vit) : hp_(std::move(hp)), vit_(std::move(vit)) {}
  ClipHParams hp_;
  VitWeights vit_;
};

// The projector of `file` (an mmproj whose hyperparameters are `hp`), with every tensor bound and
// checked. Unknown or unsupported projector types are refused: "mmproj: projector type 'x' is not
// supported (kiln supports: gemma3, mlp)".
Result<std::unique_ptr<Projector>> make_projector(const GgufFile& file, const ClipHParams& hp);

// Factories, one per projector file.
Result<std::unique_ptr<Projector>> make_gemma3_projector(const GgufFile& file, const ClipHParams& hp);
Result<std::unique_ptr<Projector>> make_mlp_projector(const GgufFile& file, const ClipHParams& hp);

}  // namespace kiln
