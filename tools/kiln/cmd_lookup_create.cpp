// `kiln lookup-create`: counts the 2-grams of a corpus into a static lookup cache for ngram-cache
// drafting (-lcs), as llama.cpp's llama-lookup-create, in its file format.
//   kiln lookup-create [-m MODEL.gguf] (-p TEXT | -f FILE) -lcs OUT
// Only the vocabulary is read; the model's tensors are not touched.
#include <cstdio>
#include <string>

#include "command.h"
#include "core/gguf.h"
#include "default_model.h"
#include "llm/speculative/ngram_cache.h"
#include "messages.h"
#include "options.h"
#include "text/tokenizer.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

int run_lookup_create(int argc, char** argv) {
  std::string model, prompt, file, out;
  OptionParser p("lookup-create", "kiln lookup-create [-m MODEL.gguf] (-p TEXT | -f FILE) -lcs OUT");
  p.description(
      "Counts which token follows every 2-gram of a text (tokenized as the model does) and writes the "
      "counts as a static lookup cache for --spec-type ngram-cache -lcs OUT (llama-lookup-create's format).");
  p.value({"-m", "--model"}, &model, "FILE",
          "GGUF file whose vocabulary to use (default: the model embedded in kiln)");
  p.value({"-p", "--prompt"}, &prompt, "TEXT", "the corpus, given inline");
  p.value({"-f", "--file"}, &file, "FILE", "read the corpus from FILE");
  p.value({"-lcs", "--lookup-cache-static"}, &out, "OUT", "the cache file to write");
  if (auto code = p.parse(argc, argv)) return *code;
  if (prompt.empty() == file.empty()) return fail("lookup-create", "give the corpus with -p or -f (one of them)", 2);
  if (out.empty()) return fail("lookup-create", "give the file to write with -lcs OUT", 2);
  if (!read_file_option(file, "lookup-create", &prompt)) return 1;
  auto gguf = model.empty() ? open_default_gguf() : GgufFile::open(model);
  if (!gguf.ok()) return fail("lookup-create", gguf.error().message);
  auto tok = text::Tokenizer::from_gguf(**gguf);
  if (!tok.ok()) return fail("lookup-create", tok.error().message);
  // As llama-lookup-create: the vocabulary's special tokens added, control tokens in the text parsed.
  const std::vector<int32_t> ids = tok->tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  NgramCounts counts;
  counts.add(ids, NgramCacheDrafter::kStaticNgram, NgramCacheDrafter::kStaticNgram, ids.size());
  if (const Status st = counts.save(out); !st.ok()) return fail("lookup-create", st.error().message);
  std::fprintf(stderr, "kiln lookup-create: %zu tokens, %zu 2-grams written to %s\n", ids.size(), counts.size(),
               out.c_str());
  return 0;
}

}  // namespace
}  // namespace kiln::cli

static ::kiln::cli::CommandRegistrar kiln_command_registrar_lookup_create(
    "lookup-create", "count a corpus' 2-grams into a static lookup cache (-lcs) for ngram-cache drafting",
    kiln::cli::run_lookup_create);
