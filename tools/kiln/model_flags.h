// Options shared by the subcommands that run a model (run, chat, perplexity, bench, serve): model
// path, threads, context and batch sizes, KV cache types and the attention path, with llama.cpp's
// flag names and meanings (-t 0 or less: all cores; -c 0: the model's whole training context).
// The model defaults to the one embedded in the kiln binary.
#pragma once

#include <memory>
#include <string>

#include "llm/context.h"
#include "llm/model.h"
#include "options.h"
#include "runtime/backend.h"

namespace kiln::cli {

// Declares -t/--threads on `p`, writing `out` (0 or less: every hardware thread, as llama.cpp).
void declare_threads(OptionParser& p, int32_t* out);

// Warns (as llama.cpp does) when a sequence may reach positions beyond the model's training
// context: `n_ctx_seq` is the most tokens one sequence can hold.
void warn_beyond_training_context(const char* command, int64_t n_ctx_seq, const Model& model);

struct ModelFlags {
  std::string model_path;  // empty: the embedded default model
  int32_t threads = 0;     // 0 or less: every hardware thread
  // context.n_ctx as set before declare() is the command's default and is shown in the help, or
  // ctx_default when the command decides later.
  ContextOptions context;
  std::string ctx_default;

  // Declares -m, -t, -c, -b, -ub, -ctk, -ctv, -fa on `p`.
  void declare(OptionParser& p);
  // Loads the model named by -m (or the embedded default); prints the error and returns null.
  std::shared_ptr<const Model> load_model(const char* command) const;
  // A context on `backend` with these options; warns when it is larger than the model's training
  // context. Prints the error and returns null.
  std::unique_ptr<Context> create_context(const char* command, std::shared_ptr<const Model> model,
                                          Backend& backend) const;
};

}  // namespace kiln::cli
