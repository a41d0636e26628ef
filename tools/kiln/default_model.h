// The default model embedded in the kiln executable at build time (models/kjv-llama-q8_0.gguf:
// a small llama trained by the project on the King James Bible, see tools/train/).
#pragma once

#include <memory>

#include "core/gguf.h"
#include "llm/model.h"

namespace kiln::cli {

// The embedded model, or an Error when this build embeds none.
Result<std::shared_ptr<const Model>> load_default_model();
// The embedded model's GGUF file (metadata, tokenizer), or an Error when this build embeds none.
Result<std::unique_ptr<GgufFile>> open_default_gguf();

}  // namespace kiln::cli
