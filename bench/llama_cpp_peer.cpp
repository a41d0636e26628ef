// The peer of `kiln bench`: the same tests run by llama.cpp's libllama through its C API (no
// JavaScript layer), for bench/compare_llama_cpp.py. Built by that script against the llama.h of
// the node-llama-cpp package's llama.cpp release and its prebuilt libllama; not part of kiln.
//
//   llama_cpp_peer MODEL.gguf P N S THREADS BACKEND_DIR [D]
//
// Tests as `kiln bench` runs them (tools/kiln/cmd_bench.cpp), each on a KV cache holding only D
// tokens of sequence 0 (default 0: emptied; else decoded before every run, untimed, and shared
// with the other streams by llama_memory_seq_cp), with random token ids: pp P (one sequence, P
// tokens in one llama_decode), tg N (one sequence, N calls of one token), tg N xS (S sequences, N
// calls of S tokens); names end in " @ dD" when D > 0. Default context parameters otherwise
// (F16 KV cache, flash attention auto), n_ctx large enough for the tests; ggml's CPU backend
// variants are loaded from BACKEND_DIR (the package's bins folder: it picks the one for this CPU).
// Prints "cpu-variant <name>" (the libggml-cpu-<name>.so ggml loaded, from /proc/self/maps; "unknown"
// when none is mapped), then one line per test: "<name> <tokens/s>". S < 2 skips the tg N xS test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "ggml-backend.h"
#include "llama.h"

namespace {

using Clock = std::chrono::steady_clock;

// Decodes `depth` tokens of sequence 0 into the emptied cache (one llama_decode; not timed), then
// n_calls batches, each of `width` tokens: sequence s gets position depth + call (width > 1: one
// token per sequence, the depth's cells shared with it) or depth + i (width == n_tokens, one
// sequence). Seconds, or -1.
double run(llama_context* ctx, int n_vocab, int depth, int n_calls, int width, bool one_sequence,
           std::mt19937& rng) {
  std::uniform_int_distribution<int> token(0, n_vocab - 1);
  llama_memory_t mem = llama_get_memory(ctx);
  llama_memory_clear(mem, true);
  if (depth > 0) {
    llama_batch fill = llama_batch_init(depth, 0, 1);
    fill.n_tokens = depth;
    for (int i = 0; i < depth; ++i) {
      fill.token[i] = token(rng);
      fill.pos[i] = i;
      fill.n_seq_id[i] = 1;
      fill.seq_id[i][0] = 0;
      fill.logits[i] = i + 1 == depth;
    }
    const int rc = llama_decode(ctx, fill);
    llama_batch_free(fill);
    if (rc != 0) return -1;
    for (int s = 1; s < width && !one_sequence; ++s) llama_memory_seq_cp(mem, 0, s, 0, depth);
    llama_synchronize(ctx);
  }
  llama_batch batch = llama_batch_init(width, 0, width);
  const auto t0 = Clock::now();
  for (int call = 0; call < n_calls; ++call) {
    batch.n_tokens = width;
    for (int i = 0; i < width; ++i) {
      batch.token[i] = token(rng);
      batch.pos[i] = depth + (one_sequence ? i : call);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = one_sequence ? 0 : i;
      batch.logits[i] = one_sequence ? i + 1 == width : 1;
    }
    if (llama_decode(ctx, batch) != 0) {
      llama_batch_free(batch);
      return -1;
    }
    llama_synchronize(ctx);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  llama_batch_free(batch);
  return s;
}

// The CPU variant of ggml's backend that this process mapped (libggml-cpu-<variant>.so).
std::string loaded_cpu_variant() {
  std::ifstream maps("/proc/self/maps");
  const std::string prefix = "libggml-cpu-";
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.rfind(prefix);
    if (at == std::string::npos) continue;
    const size_t start = at + prefix.size(), end = line.find(".so", start);
    if (end != std::string::npos) return line.substr(start, end - start);
  }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: %s MODEL.gguf P N S THREADS BACKEND_DIR [D]\n", argv[0]);
    return 2;
  }
  const int n_prompt = std::atoi(argv[2]), n_gen = std::atoi(argv[3]), n_streams = std::atoi(argv[4]);
  const int n_threads = std::atoi(argv[5]);
  const int depth = argc == 8 ? std::atoi(argv[7]) : 0;
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);  // errors are reported below
  ggml_backend_load_all_from_path(argv[6]);
  std::printf("cpu-variant %s\n", loaded_cpu_variant().c_str());
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "llama.cpp cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(depth + std::max(n_prompt, n_gen * n_streams) + 64);
  cp.n_batch = static_cast<uint32_t>(std::max({n_prompt, n_streams, depth}));
  cp.n_ubatch = 512;
  cp.n_seq_max = static_cast<uint32_t>(std::max(1, n_streams));
  cp.n_threads = cp.n_threads_batch = n_threads;
  cp.kv_unified = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) {
    std::fprintf(stderr, "llama.cpp cannot create a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::mt19937 rng(1234);
  struct Test {
    std::string name;
    int calls, width;
    bool one_sequence;
  };
  const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
  const Test tests[] = {
      {"pp" + std::to_string(n_prompt) + at, 1, n_prompt, true},
      {"tg" + std::to_string(n_gen) + at, n_gen, 1, false},
      {"tg" + std::to_string(n_gen) + " x" + std::to_string(n_streams) + at, n_streams > 1 ? n_gen : 0,
       n_streams, false},
  };
  int status = 0;
  for (const Test& t : tests) {
    if (t.width <= 0 || t.calls <= 0) continue;
    const double s = run(ctx, n_vocab, depth, t.calls, t.width, t.one_sequence, rng);
    if (s < 0) {
      std::fprintf(stderr, "llama_decode failed in %s\n", t.name.c_str());
      status = 1;
      continue;
    }
    std::printf("%s %.3f\n", t.name.c_str(), static_cast<double>(t.calls) * t.width / s);
  }
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return status;
}
