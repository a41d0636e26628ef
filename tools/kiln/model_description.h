// llama.cpp's one-line description of a model (llama_model_desc, llama-bench's model_type):
// "ARCH SIZE FTYPE", e.g. "llama 1B Q4_0", "qwen2 0.5B Q8_0", "llama ?B all F32".
//   SIZE: llama.cpp's size class of the architecture, from the layer count (and width, heads or
//         vocabulary where its tables look at them); "?B" where its tables have no entry.
//   FTYPE: the name of general.file_type ("Q4_K - Medium"); without that key, the most common
//          tensor type's, prefixed "(guessed) " as llama.cpp does.
#pragma once

#include <string>

#include "llm/model.h"

namespace kiln::cli {

std::string model_description(const Model& model);

}  // namespace kiln::cli
