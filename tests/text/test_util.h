// Helpers shared by the text tests: loading fixture vocabularies and reading files.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "test_data.h"
#include "text/tokenizer.h"

namespace kiln::text::testing {

inline std::string source_path(const std::string& rel) { return std::string(KILN_SOURCE_DIR) + "/" + rel; }

// Every vocabulary llama.cpp ships in its models/ folder (vocab/ggml-vocab-NAME.gguf of the test
// data), and those that come with llama.cpp's own test vectors (NAME.gguf.inp / .out).
inline const std::vector<std::string> kAllVocabs = {
    "aquila",  "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
    "gemma-4", "gpt-2",    "gpt-neox", "llama-bpe", "llama-spm",      "mpt",          "nomic-bert-moe",
    "phi-3",   "qwen2",    "qwen35",   "refact",    "starcoder"};
inline const std::vector<std::string> kVocabsWithVectors = {
    "bert-bge",  "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",    "llama-bpe",
    "llama-spm", "mpt",       "phi-3",          "qwen2",        "qwen35", "refact",  "starcoder"};

// Whether llama.cpp's detokenize clean-up (" ." -> ".", " 's" -> "'s", ...) can change `text`, in
// vocabularies that ask for it (Vocab::clean_spaces).
inline bool clean_up_applies(const std::string& text) {
  for (const char* s : {" ?", " !", " .", " ,", " '"})
    if (text.find(s) != std::string::npos) return true;
  return false;
}

// A vocabulary's name as a test name ("llama-spm" -> "llama_spm").
inline std::string vocab_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One loaded tokenizer per llama.cpp vocabulary ("llama-spm", "qwen2", ...), kept for the whole run.
inline const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::map<std::string, std::pair<std::unique_ptr<GgufFile>, std::unique_ptr<Tokenizer>>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string path = test_data::path("vocab/ggml-vocab-" + name + ".gguf");
    auto file = GgufFile::open(path);
    KILN_ASSERT(file.ok(), file.ok() ? "" : file.error().message);
    auto tok = Tokenizer::from_gguf(**file);
    KILN_ASSERT(tok.ok(), tok.ok() ? "" : tok.error().message);
    it = cache
             .emplace(name, std::make_pair(std::move(file).value(),
                                           std::make_unique<Tokenizer>(std::move(tok).value())))
             .first;
  }
  return *it->second.second;
}

}  // namespace kiln::text::testing
