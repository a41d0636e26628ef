// `kiln quantize IN OUT.gguf TYPE [--threads N]`: for a language model (a GGUF with
// general.architecture), llama-quantize's presets and its output file; for a Stable Diffusion file
// (.safetensors, or a GGUF without metadata as stable-diffusion.cpp writes them), the type of
// stable-diffusion.cpp's `convert --type` and its per-tensor rules.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "command.h"
#include "core/gguf.h"
#include "messages.h"
#include "model_flags.h"
#include "models/sd/weight_file.h"
#include "options.h"
#include "quantize/quantize.h"
#include "quantize/sd_policy.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

// The TYPE list for the help.
std::string preset_list() {
  std::string text = "TYPE (case-insensitive):\n";
  for (const quantize::Preset& p : quantize::all_presets()) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-8s %s\n", std::string(p.name).c_str(),
                  std::string(p.description).c_str());
    text += line;
  }
  text.pop_back();
  return text;
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
  std::string in_path, out_path, type_name;
  int32_t n_threads = 0;
  OptionParser p("quantize", "kiln quantize IN OUT.gguf TYPE [--threads N]");
  p.description(
      "A language model (GGUF): writes the file llama.cpp's llama-quantize writes for the same input\n"
      "and TYPE: the same per-tensor types, tensor order, bytes and metadata.\n"
      "A Stable Diffusion model (.safetensors, or a GGUF with stable-diffusion.cpp's names and no\n"
      "metadata): writes the GGUF stable-diffusion.cpp's `sd-cli -M convert --type TYPE` writes: the\n"
      "linear layers' weights and the norms' gains in TYPE; conv kernels, biases, embeddings and the\n"
      "UNet's time embedding as they are (F32 or F16).");
  p.argument(&in_path, "IN",
             "the model to quantize: F32, F16 or BF16 weights (tensors already of the "
             "target type are copied)");
  p.argument(&out_path, "OUT.gguf", "the GGUF file to write");
  p.argument(&type_name, "TYPE",
             "a language model's preset, e.g. Q4_K_M (list below); for Stable Diffusion a type");
  declare_threads(p, &n_threads);
  p.notes(
      "Importance matrices (llama-quantize --imatrix) are not read yet: every type is quantized\n"
      "without one, as llama-quantize does when none is given.\n\n"
      "Stable Diffusion TYPE (case-insensitive): F32 F16 BF16 Q8_0 Q5_1 Q5_0 Q4_1 Q4_0 Q6_K Q5_K Q4_K\n"
      "Q3_K Q2_K.\n\n" +
      preset_list());
  if (auto code = p.parse(argc, argv)) return *code;
  if (!quantize::find_preset(type_name) && !quantize::sd_type_from_name(type_name))
    return fail("quantize", "unknown type '" + type_name + "' (see kiln quantize --help for the list)", 2);
  std::error_code ec;
  if (std::filesystem::equivalent(in_path, out_path, ec))
    return fail("quantize", "OUT must differ from IN ('" + in_path + "')", 2);
  if (const Status st = check_output_path(out_path); !st.ok()) return fail("quantize", st.error().message);

  auto src = sd::SdWeightFile::open(in_path);  // a GGUF as it is, or a safetensors file packed as one
  if (!src) return fail("quantize", src.error().message);
  const bool stable_diffusion = (*src)->format() == sd::WeightFormat::Safetensors ||
                                (*src)->gguf().find("general.architecture") == nullptr;
  const auto preset = stable_diffusion ? std::nullopt : quantize::find_preset(type_name);
  const auto sd_type = stable_diffusion ? quantize::sd_type_from_name(type_name) : std::nullopt;
  if (!preset && !sd_type)
    return fail("quantize",
                "unknown type '" + type_name + "' for " +
                    (stable_diffusion ? "a Stable Diffusion" : "a language") +
                    " model (see kiln quantize --help for the list)",
                2);
  const bool tty = isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  const quantize::QuantizeOptions options{
      .preset = preset.value_or(quantize::Preset{}),
      .n_threads = std::max(n_threads, 0),
      .on_tensor = [tty](const quantize::TensorProgress& p) { report_tensor(p, tty); }};
  auto summary = stable_diffusion ? quantize::quantize_sd((*src)->gguf(), out_path, *sd_type, options)
                                  : quantize::quantize_gguf((*src)->gguf(), out_path, options);
  if (!summary) {
    if (tty) std::fputc('\n', stderr);
    return fail("quantize", summary.error().message);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double n = static_cast<double>(std::max<uint64_t>(1, summary->n_elements));
  if (preset)
    std::printf("quantized %s -> %s as %s (file_type %u) in %.2f s\n", in_path.c_str(), out_path.c_str(),
                std::string(preset->name).c_str(), static_cast<unsigned>(preset->file_type), seconds);
  else
    std::printf("quantized %s -> %s as %s (Stable Diffusion, stable-diffusion.cpp's rules) in %.2f s\n",
                in_path.c_str(), out_path.c_str(), std::string(dtype_name(*sd_type)).c_str(), seconds);
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

KILN_COMMAND(quantize,
             "quantize a GGUF model to a llama.cpp preset (Q4_K_M, Q8_0, ...) or an SD model to a type",
             kiln::cli::run_quantize);
