// `kiln tokenize`: prints the tokens of a prompt, like llama.cpp's llama-tokenize.
//   kiln tokenize [-m MODEL.gguf] (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]
// Only the vocabulary is read; the model's tensors are not touched.
#include <cstdio>
#include <string>

#include "command.h"
#include "core/gguf.h"
#include "default_model.h"
#include "messages.h"
#include "options.h"
#include "text/tokenizer.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

int run_tokenize(int argc, char** argv) {
  std::string model, prompt, file;
  bool have_prompt = false, ids_only = false, no_bos = false, parse_special = false;
  OptionParser p("tokenize", "kiln tokenize [-m MODEL.gguf] (-p TEXT | -f FILE) [options]");
  p.description("Prints the tokens of a text, as llama.cpp's llama-tokenize; only the vocabulary is read.");
  p.value({"-m", "--model"}, &model, "FILE",
          "GGUF file whose vocabulary to use (default: the model embedded in kiln)");
  p.custom(
      {"-p", "--prompt"},
      [&](const std::string& v) {
        prompt = v;
        have_prompt = true;
        return std::string();
      },
      "TEXT", "text to tokenize");
  p.value({"-f", "--file"}, &file, "FILE", "read the text from FILE");
  p.flag({"--ids"}, &ids_only, "print only the ids, as [1, 15043, ...]");
  p.flag({"--no-bos"}, &no_bos, "never add BOS (nor the other special tokens the vocabulary adds)");
  p.flag({"--parse-special"}, &parse_special,
         "turn control tokens written in the text (e.g. <|im_start|>) into their ids");
  if (auto code = p.parse(argc, argv)) return *code;
  if (have_prompt == !file.empty()) return fail("tokenize", "give the text with -p or -f (one of them)", 2);
  if (!file.empty()) {
    auto text = read_text_file(file);
    if (!text.ok()) return fail("tokenize", text.error().message);
    prompt = std::move(*text);
  }

  auto gguf = model.empty() ? open_default_gguf() : GgufFile::open(model);
  if (!gguf.ok()) return fail("tokenize", gguf.error().message);
  auto tok = text::Tokenizer::from_gguf(**gguf);
  if (!tok.ok()) return fail("tokenize", tok.error().message);
  // As llama-tokenize: special tokens are added exactly when the vocabulary adds BOS.
  const bool add_special = tok->add_bos() && !no_bos;
  const std::vector<int32_t> ids = tok->tokenize(prompt, add_special, parse_special);
  std::string out;
  if (ids_only) {
    out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    out += "]\n";
  } else {
    for (const int32_t id : ids) {
      char num[16];
      std::snprintf(num, sizeof num, "%6d", id);
      out += std::string(num) + " -> '" + tok->token_to_piece(id, /*special=*/true).value() + "'\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace
}  // namespace kiln::cli

KILN_COMMAND(tokenize, "print the tokens of a prompt (vocabulary only)", kiln::cli::run_tokenize);
