// `kiln quantize IN.gguf OUT.gguf TYPE [--threads N]`: llama-quantize's presets, same output file.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "command.h"
#include "core/gguf.h"
#include "quantize/quantize.h"

namespace kiln::cli {
namespace {

void print_help() {
  std::printf(
      "usage: kiln quantize IN.gguf OUT.gguf TYPE [--threads N]\n\n"
      "Writes the file llama.cpp's llama-quantize writes for the same input and TYPE: the same\n"
      "per-tensor types, tensor order, bytes and metadata. IN holds F32, F16 or BF16 weights\n"
      "(tensors already of the target type are copied).\n\n"
      "options:\n"
      "  --threads N   worker threads (default: all cores)\n\n"
      "Importance matrices (llama-quantize --imatrix) are not read yet: every type is quantized\n"
      "without one, as llama-quantize does when none is given.\n\n"
      "TYPE (case-insensitive):\n");
  for (const quantize::Preset& p : quantize::all_presets()) {
    std::printf("  %-8s %s\n", std::string(p.name).c_str(), std::string(p.description).c_str());
  }
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// One line per tensor, or a bar redrawn in place on a terminal.
void report_tensor(const quantize::TensorProgress& p, bool tty) {
  if (tty) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * (p.index + 1) / p.count);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r[%s] %4zu/%zu %-36.36s %-7s", bar.c_str(), p.index + 1, p.count,
                 std::string(p.name).c_str(), std::string(dtype_name(p.dst_type)).c_str());
    if (p.index + 1 == p.count) std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  std::printf("[%4zu/%4zu] %-36s %6s -> %-6s %9.3f MiB -> %9.3f MiB%s\n", p.index + 1, p.count,
              std::string(p.name).c_str(), std::string(dtype_name(p.src_type)).c_str(),
              std::string(dtype_name(p.dst_type)).c_str(), mib(p.src_bytes), mib(p.dst_bytes),
              p.fell_back ? " (fallback: row length)" : "");
}

int run_quantize(int argc, char** argv) {
  std::vector<std::string_view> positional;
  int n_threads = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_help();
      return 0;
    }
    if (arg == "--threads" || arg == "-t") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln quantize: %s needs a value\n", argv[i]);
        return 2;
      }
      const std::string_view v = argv[++i];
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n_threads);
      if (ec != std::errc() || ptr != v.data() + v.size() || n_threads < 1 || n_threads > 4096) {
        std::fprintf(stderr, "kiln quantize: --threads '%s' is not a count in [1, 4096]\n", argv[i]);
        return 2;
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "kiln quantize: unknown option '%s' (see --help)\n", argv[i]);
      return 2;
    }
    positional.push_back(arg);
  }
  if (positional.size() != 3) {
    std::fprintf(stderr, "usage: kiln quantize IN.gguf OUT.gguf TYPE [--threads N] (see --help)\n");
    return 2;
  }
  const std::string in_path(positional[0]);
  const std::string out_path(positional[1]);
  const auto preset = quantize::find_preset(positional[2]);
  if (!preset) {
    std::fprintf(stderr, "kiln quantize: unknown type '%s' (see --help for the list)\n",
                 std::string(positional[2]).c_str());
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::equivalent(in_path, out_path, ec)) {
    std::fprintf(stderr, "kiln quantize: OUT must differ from IN ('%s')\n", in_path.c_str());
    return 2;
  }

  auto src = GgufFile::open(in_path);
  if (!src) {
    std::fprintf(stderr, "kiln quantize: %s\n", src.error().message.c_str());
    return 1;
  }
  const bool tty = isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  auto summary = quantize::quantize_gguf(
      **src, out_path,
      quantize::QuantizeOptions{
          .preset = *preset, .n_threads = n_threads, .on_tensor = [tty](const quantize::TensorProgress& p) {
            report_tensor(p, tty);
          }});
  if (!summary) {
    if (tty) std::fputc('\n', stderr);
    std::fprintf(stderr, "kiln quantize: %s\n", summary.error().message.c_str());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double n = static_cast<double>(std::max<uint64_t>(1, summary->n_elements));
  std::printf("quantized %s -> %s as %s (file_type %u) in %.2f s\n", in_path.c_str(), out_path.c_str(),
              std::string(preset->name).c_str(), static_cast<unsigned>(preset->file_type), seconds);
  std::printf("tensors: %zu, converted %zu, fallback types %zu\n", summary->n_tensors, summary->n_converted,
              summary->n_fallback);
  std::printf("weights: %.2f MiB (%.2f bpw) -> %.2f MiB (%.2f bpw)\n", mib(summary->src_tensor_bytes),
              8.0 * static_cast<double>(summary->src_tensor_bytes) / n, mib(summary->dst_tensor_bytes),
              8.0 * static_cast<double>(summary->dst_tensor_bytes) / n);
  const auto in_size = std::filesystem::file_size(in_path, ec);
  const auto out_size = ec ? 0 : std::filesystem::file_size(out_path, ec);
  if (!ec) std::printf("file: %.2f MiB -> %.2f MiB\n", mib(in_size), mib(out_size));
  for (const std::string& w : summary->warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}

}  // namespace
}  // namespace kiln::cli

KILN_COMMAND(quantize, "quantize a GGUF model to a llama.cpp preset (Q4_K_M, Q8_0, ...)",
             kiln::cli::run_quantize);
