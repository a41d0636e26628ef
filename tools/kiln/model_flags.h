// Options shared by the subcommands that run a model (run, perplexity, bench, serve): model path,
// threads, context and batch sizes, KV cache types and the attention path, with llama.cpp's flag
// names. The model defaults to the one embedded in the kiln binary.
#pragma once

#include <memory>
#include <string>

#include "llm/context.h"
#include "llm/model.h"
#include "options.h"

namespace kiln::cli {

struct ModelFlags {
  std::string model_path;  // empty: the embedded default model
  int32_t threads = 0;     // 0: every hardware thread
  ContextOptions context;

  // Declares -m, -t, -c, -b, -ub, -ctk, -ctv, -fa on `p`.
  void declare(OptionParser& p);
  // Loads the model named by -m (or the embedded default); prints the error and returns null.
  std::shared_ptr<const Model> load_model(const char* command) const;
};

}  // namespace kiln::cli
