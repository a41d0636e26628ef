#include "llm/model.h"

#include "text/grammar/grammar_vocab.h"

namespace kiln {

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  return bind(std::move(file), path);
}

Result<std::shared_ptr<const Model>> Model::from_memory(std::span<const uint8_t> bytes, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(auto file, GgufFile::parse(bytes));
  return bind(std::move(file), name);
}

Result<std::shared_ptr<const Model>> Model::bind(std::unique_ptr<GgufFile> file, const std::string& path) {
  std::shared_ptr<Model> m(new Model());
  m->path_ = path;
  m->file_ = std::move(file);
  KILN_ASSIGN_OR_RETURN(m->hp_, read_hparams(*m->file_));
  KILN_ASSIGN_OR_RETURN(m->weights_, bind_decoder_weights(*m->file_, m->hp_));
  KILN_ASSIGN_OR_RETURN(text::Tokenizer tok, text::Tokenizer::from_gguf(*m->file_));
  if (tok.n_tokens() != m->hp_.n_vocab)
    return make_error("model: the tokenizer has ", tok.n_tokens(), " tokens but the output has ", m->hp_.n_vocab, " rows");
  m->tokenizer_ = std::make_unique<text::Tokenizer>(std::move(tok));
  m->name_ = gguf_display_name(*m->file_, path);
  return std::shared_ptr<const Model>(std::move(m));
}

std::string gguf_display_name(const GgufFile& file, const std::string& path) {
  auto name = file.get_string("general.name");
  if (name.ok() && !name->empty()) return *name;
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for (const auto& t : file_->tensors()) total += t.size;
  return total;
}

std::shared_ptr<const grammar::GrammarVocab> Model::grammar_vocab() const {
  std::call_once(grammar_vocab_once_, [this] { grammar_vocab_ = grammar::GrammarVocab::build(*tokenizer_); });
  return grammar_vocab_;
}

}  // namespace kiln
