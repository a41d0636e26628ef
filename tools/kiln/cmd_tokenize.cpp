// `kiln tokenize`: prints the tokens of a prompt, like llama.cpp's llama-tokenize.
//   kiln tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]
// Only the vocabulary is read; the model's tensors are not touched.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "command.h"
#include "core/gguf.h"
#include "text/tokenizer.h"

namespace kiln::cli {
namespace {

void print_usage() {
  std::printf(
      "usage: kiln tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]\n\n"
      "  -m, --model FILE     GGUF file whose vocabulary to use\n"
      "  -p, --prompt TEXT    text to tokenize\n"
      "  -f, --file FILE      read the text from FILE\n"
      "  --ids                print only the ids, as [1, 15043, ...]\n"
      "  --no-bos             never add BOS (nor the other special tokens the vocabulary adds)\n"
      "  --parse-special      turn control tokens written in the text (e.g. <|im_start|>) into their ids\n");
}

int run_tokenize(int argc, char** argv) {
  std::string model, prompt, file;
  bool have_prompt = false, ids_only = false, no_bos = false, parse_special = false;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln tokenize: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "-m" || arg == "--model") {
      const char* v = value("-m");
      if (!v) return 2;
      model = v;
    } else if (arg == "-p" || arg == "--prompt") {
      const char* v = value("-p");
      if (!v) return 2;
      prompt = v;
      have_prompt = true;
    } else if (arg == "-f" || arg == "--file") {
      const char* v = value("-f");
      if (!v) return 2;
      file = v;
    } else if (arg == "--ids") {
      ids_only = true;
    } else if (arg == "--no-bos") {
      no_bos = true;
    } else if (arg == "--parse-special") {
      parse_special = true;
    } else if (arg == "-h" || arg == "--help") {
      print_usage();
      return 0;
    } else {
      std::fprintf(stderr, "kiln tokenize: unknown argument '%s'\n\n", arg.c_str());
      print_usage();
      return 2;
    }
  }
  if (model.empty() || have_prompt == !file.empty()) {
    std::fprintf(stderr, "kiln tokenize: need -m and exactly one of -p / -f\n\n");
    print_usage();
    return 2;
  }
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "kiln tokenize: cannot read '%s'\n", file.c_str());
      return 1;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
  }

  auto gguf = GgufFile::open(model);
  if (!gguf.ok()) {
    std::fprintf(stderr, "kiln tokenize: %s\n", gguf.error().message.c_str());
    return 1;
  }
  auto tok = text::Tokenizer::from_gguf(**gguf);
  if (!tok.ok()) {
    std::fprintf(stderr, "kiln tokenize: %s\n", tok.error().message.c_str());
    return 1;
  }
  // As llama-tokenize: special tokens are added exactly when the vocabulary adds BOS.
  const bool add_special = tok->add_bos() && !no_bos;
  const std::vector<int32_t> ids = tok->tokenize(prompt, add_special, parse_special);
  if (ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ", %d" : "%d", ids[i]);
    std::printf("]\n");
    return 0;
  }
  for (const int32_t id : ids) {
    const std::string piece = tok->token_to_piece(id, /*special=*/true).value();
    std::printf("%6d -> '%s'\n", id, piece.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace kiln::cli

KILN_COMMAND(tokenize, "print the tokens of a prompt (vocabulary only)", kiln::cli::run_tokenize);
