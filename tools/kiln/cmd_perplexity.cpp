// `kiln perplexity`: llama.cpp's perplexity measurement over a text file, and KL divergence
// against base log-probabilities saved from another model (to judge quantized files).
//   kiln perplexity -m MODEL.gguf -f TEXT [-c 512] [--chunks N]
//   kiln perplexity -m BASE.gguf -f TEXT --kl-divergence-base base.kld      (saves)
//   kiln perplexity -m QUANT.gguf -f TEXT --kl-divergence-base base.kld --kl-divergence
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "command.h"
#include "core/half.h"
#include "llm/perplexity.h"
#include "messages.h"
#include "model_flags.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

constexpr char kKldMagic[8] = {'K', 'I', 'L', 'N', 'K', 'L', 'D', '1'};

struct KldHeader {
  char magic[8];
  uint32_t n_vocab, n_ctx, n_chunks, n_text_tokens;
};

// Base log-probabilities: written while scoring the base model, read back to compare.
class KldFile {
 public:
  Status open_write(const std::string& path, const KldHeader& h, std::span<const int32_t> tokens) {
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_) return make_error("perplexity: cannot write '", path, "'");
    out_.write(reinterpret_cast<const char*>(&h), sizeof h);
    out_.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
    return ok_status();
  }
  Status open_read(const std::string& path, const KldHeader& want, std::span<const int32_t> tokens) {
    in_.open(path, std::ios::binary);
    if (!in_) return make_error("perplexity: cannot read '", path, "'");
    KldHeader h{};
    in_.read(reinterpret_cast<char*>(&h), sizeof h);
    if (!in_ || std::memcmp(h.magic, kKldMagic, 8) != 0) return make_error("perplexity: '", path, "' is not a kiln KLD base file");
    if (h.n_vocab != want.n_vocab || h.n_ctx != want.n_ctx || h.n_chunks < want.n_chunks ||
        h.n_text_tokens != want.n_text_tokens)
      return make_error("perplexity: '", path, "' was made with another vocabulary, context size or text (vocab ",
                        h.n_vocab, ", ctx ", h.n_ctx, ", chunks ", h.n_chunks, ", tokens ", h.n_text_tokens, ")");
    std::vector<int32_t> base_tokens(h.n_text_tokens);
    in_.read(reinterpret_cast<char*>(base_tokens.data()), static_cast<std::streamsize>(base_tokens.size() * 4));
    if (!in_ || !std::equal(base_tokens.begin(), base_tokens.end(), tokens.begin()))
      return make_error("perplexity: '", path, "' was made from a different tokenization of the text");
    return ok_status();
  }
  void write(std::span<const double> logp, std::vector<uint16_t>& tmp) {
    tmp.resize(logp.size());
    for (size_t i = 0; i < logp.size(); ++i) tmp[i] = f32_to_f16(static_cast<float>(std::max(logp[i], -60000.0)));
    out_.write(reinterpret_cast<const char*>(tmp.data()), static_cast<std::streamsize>(tmp.size() * 2));
  }
  Status read(std::span<double> logp, std::vector<uint16_t>& tmp) {
    tmp.resize(logp.size());
    in_.read(reinterpret_cast<char*>(tmp.data()), static_cast<std::streamsize>(tmp.size() * 2));
    if (!in_) return make_error("perplexity: the KLD base file is truncated");
    for (size_t i = 0; i < logp.size(); ++i) logp[i] = f16_to_f32(tmp[i]);
    return ok_status();
  }
  bool writing() const { return out_.is_open(); }
  bool reading() const { return in_.is_open(); }

 private:
  std::ofstream out_;
  std::ifstream in_;
};

int run_perplexity(int argc, char** argv) {
  ModelFlags mf;
  mf.context.n_ctx = 512;  // llama.cpp's perplexity default
  std::string text_file, kld_base, logits_out;
  int64_t max_chunks = -1;
  bool kl_divergence = false;
  OptionParser p("perplexity",
                 "kiln perplexity [-m MODEL.gguf] -f TEXT [-c N] [--chunks N] [--kl-divergence-base FILE "
                 "[--kl-divergence]] [--logits-out FILE]");
  p.description(
      "Measures perplexity as llama.cpp's llama-perplexity does: the text in chunks of -c tokens, the\n"
      "second half of each scored. With --kl-divergence-base FILE it saves the model's log-probabilities\n"
      "(a base model), and with --kl-divergence compares another model (a quantized one) against them.\n"
      "--logits-out FILE writes the scored positions' logits exactly, for comparing builds, machines and\n"
      "kernel levels (KILN_CPU) bit for bit.");
  mf.declare(p);
  p.value({"-f", "--file"}, &text_file, "FILE", "the text to score");
  p.value({"--chunks"}, &max_chunks, "N", "score at most N chunks (default -1: all)",
          IntRange::at_least(1).or_also(-1));
  p.value({"--kl-divergence-base"}, &kld_base, "FILE", "save the model's log-probabilities to FILE (or read them with --kl-divergence)");
  p.flag({"--kl-divergence"}, &kl_divergence, "compare with the log-probabilities of --kl-divergence-base");
  p.value({"--logits-out"}, &logits_out, "FILE",
          "write every scored position's logits to FILE: n_vocab little-endian F32 values per position, in order");
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("perplexity")) return *code;
  const auto fail = [](const std::string& msg) { return cli::fail("perplexity", msg); };
  if (text_file.empty()) return cli::fail("perplexity", "give the text with -f FILE", 2);
  if (kl_divergence && kld_base.empty())
    return cli::fail("perplexity", "--kl-divergence needs --kl-divergence-base FILE", 2);
  if (!kld_base.empty() && !kl_divergence) {
    if (const Status st = check_output_path(kld_base); !st.ok()) return fail(st.error().message);
  }
  if (!logits_out.empty()) {
    if (const Status st = check_output_path(logits_out); !st.ok()) return fail(st.error().message);
  }
  std::string text;  // less one final newline, as llama-perplexity's -f
  if (!read_file_option(text_file, "perplexity", &text)) return 1;
  auto model = mf.load_model("perplexity");
  if (!model) return 1;
  if (auto code = mf.fit_print_if_asked("perplexity", model)) return *code;
  const auto& tok = model->tokenizer();
  const std::vector<int32_t> tokens = tok.tokenize(text, true, false);
  ChunkScoring scoring;
  scoring.n_ctx = context_size(mf.context, model->hparams());
  scoring.max_chunks = max_chunks;
  scoring.bos = tok.add_bos() ? tok.bos() : -1;
  mf.context.n_batch = std::max(mf.context.n_batch, scoring.n_ctx);
  const int64_t n_chunks = chunk_count(static_cast<int64_t>(tokens.size()), scoring);

  auto mc = mf.create_context("perplexity", model, mf.context);
  if (!mc) return 1;
  Context& ctx = *mc->context;
  const int64_t n_vocab = ctx.n_vocab();
  KldFile kld;
  const KldHeader header{{'K', 'I', 'L', 'N', 'K', 'L', 'D', '1'}, static_cast<uint32_t>(n_vocab),
                         static_cast<uint32_t>(scoring.n_ctx), static_cast<uint32_t>(n_chunks),
                         static_cast<uint32_t>(tokens.size())};
  if (!kld_base.empty()) {
    const Status st = kl_divergence ? kld.open_read(kld_base, header, tokens) : kld.open_write(kld_base, header, tokens);
    if (!st.ok()) return fail(st.error().message);
  }
  std::fprintf(stderr, "kiln perplexity: %zu tokens, %lld chunks of %lld, scoring the second half of each\n",
               tokens.size(), static_cast<long long>(n_chunks), static_cast<long long>(scoring.n_ctx));

  NllAccumulator nll;
  KlStats kl;
  std::vector<double> logp(static_cast<size_t>(n_vocab)), base_logp(static_cast<size_t>(n_vocab));
  std::vector<uint16_t> tmp;
  std::ofstream logits_file;
  if (!logits_out.empty()) {
    logits_file.open(logits_out, std::ios::binary | std::ios::trunc);
    if (!logits_file) return fail("cannot write " + logits_out);
  }
  const Status st = score_chunks(
      ctx, tokens, scoring,
      [&](std::span<const float> logits, int32_t target) -> Status {
        if (logits_file.is_open()) {
          logits_file.write(reinterpret_cast<const char*>(logits.data()),
                            static_cast<std::streamsize>(logits.size_bytes()));
          if (!logits_file) return make_error("cannot write ", logits_out);
        }
        if (!kld.writing() && !kld.reading()) {
          nll.add(-log_prob(logits, target));
          return ok_status();
        }
        log_softmax(logits, logp);
        nll.add(-logp[static_cast<size_t>(target)]);
        if (kld.writing()) {
          kld.write(logp, tmp);
          return ok_status();
        }
        KILN_TRY(kld.read(base_logp, tmp));
        kl.add(base_logp, logp);
        return ok_status();
      },
      [&](int64_t chunk) {
        std::printf("[%lld]%.4f,", static_cast<long long>(chunk), nll.perplexity());
        std::fflush(stdout);
      });
  if (!st.ok()) return fail(st.error().message);
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", nll.perplexity(), nll.perplexity_error());
  if (kld.reading()) {
    std::printf("Mean    KLD: %10.6f +/- %10.6f\n", kl.mean(), kl.mean_error());
    std::printf("Same top p: %6.3f %%\n", 100.0 * kl.same_top_fraction());
  }
  return 0;
}

}  // namespace

KILN_COMMAND(perplexity, "measure perplexity (and KL divergence against a base model) on a text", run_perplexity);

}  // namespace kiln::cli
