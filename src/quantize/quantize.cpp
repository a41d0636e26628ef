#include "quantize/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <system_error>

#include "core/gguf_format.h"
#include "core/half.h"
#include "core/index_threads.h"
#include "ops/quant/quant.h"
#include "quantize/policy.h"
#include "quantize/sd_policy.h"

namespace kiln::quantize {
namespace {

// Keys llama.cpp drops from the copied metadata; the first two are re-added at the end.
constexpr std::string_view kQuantVersionKey = "general.quantization_version";
constexpr std::string_view kFileTypeKey = "general.file_type";
constexpr std::string_view kSplitKeys[] = {"split.no", "split.count", "split.tensors.count"};

// Rows handed to a worker at a time: at least 32*512 values. ref: llama_model_quantize_impl.
constexpr int64_t kMinChunkValues = 32 * 512;

bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Decodes a float tensor's bytes (any alignment) into out[0..n).
void decode_floats(DType type, std::span<const uint8_t> bytes, float* out, int64_t n) {
  if (type == DType::F32) {
    std::memcpy(out, bytes.data(), static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, sizeof h);
    out[i] = type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

// llama.cpp loads with check_tensors: a float tensor holding NaN or Inf is refused.
Status check_finite(const GgufTensorInfo& t, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      return make_error("quantize: tensor '", t.name, "' holds a non-finite value at element ", i, " of ", n);
    }
  }
  return ok_status();
}

// Quantizes `nrows` rows of `n_per_row` values from src into dst on up to n_threads threads (0 or
// less: every hardware thread), in chunks of whole rows (rows are independent, so the bytes do not depend on
// the split).
void quantize_rows(DType type, const float* src, uint8_t* dst, int64_t nrows, int64_t n_per_row,
                   const float* imatrix, int n_threads) {
  const int64_t rows_per_chunk = std::max<int64_t>(1, (kMinChunkValues + n_per_row - 1) / n_per_row);
  const int64_t n_chunks = (nrows + rows_per_chunk - 1) / rows_per_chunk;
  const size_t row_bytes = row_size(type, n_per_row);
  for_each_index_on_threads(n_chunks, n_threads, [&](int64_t c) {
    const int64_t first = c * rows_per_chunk;
    const int64_t rows = std::min(rows_per_chunk, nrows - first);
    const size_t written =
        quantize_chunk(type, src + first * n_per_row, dst + first * row_bytes, rows, n_per_row, imatrix);
    KILN_ASSERT(written == static_cast<size_t>(rows) * row_bytes, "quantize_chunk wrote an unexpected size");
  });
}

// The importance weights for one tensor, or null (with a warning where llama.cpp warns).
Result<const float*> find_importance(const QuantizeOptions& options, const GgufTensorInfo& t,
                                     std::vector<std::string>& warnings) {
  if (options.imatrix == nullptr) return static_cast<const float*>(nullptr);
  const auto it = options.imatrix->find(t.name);
  if (it == options.imatrix->end()) {
    warnings.push_back("no importance weights for '" + t.name + "'");
    return static_cast<const float*>(nullptr);
  }
  const uint64_t expected = static_cast<uint64_t>(t.ne[0]) * static_cast<uint64_t>(t.ne[2]);
  if (it->second.size() != expected) {
    // llama.cpp tolerates this for the token embedding only (imatrix files often skip it)
    if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") {
      warnings.push_back("importance weights for '" + t.name + "' have the wrong size, ignored");
      return static_cast<const float*>(nullptr);
    }
    return make_error("quantize: importance weights for '", t.name, "' have ", it->second.size(),
                      " values, expected ne0 * ne2 = ", expected);
  }
  for (float w : it->second) {
    if (!std::isfinite(w))
      return make_error("quantize: importance weights for '", t.name, "' hold a non-finite value");
  }
  return it->second.data();
}

void copy_metadata(const GgufFile& src, FileType file_type, GgufWriter& writer) {
  for (const GgufKv& kv : src.metadata()) {
    const std::string_view key = kv.key;
    if (key == kQuantVersionKey || key == kFileTypeKey) continue;
    if (std::find(std::begin(kSplitKeys), std::end(kSplitKeys), key) != std::end(kSplitKeys)) continue;
    writer.set(kv.key, kv.value);
  }
  writer.set_u32(std::string(kQuantVersionKey), kQuantizationVersion);
  writer.set_u32(std::string(kFileTypeKey), static_cast<uint32_t>(file_type));
}

// Streams every tensor, converted where its type changes, into a begun writer.
Result<QuantizeSummary> write_tensors(const GgufFile& src, const std::vector<TensorChoice>& choices,
                                      const QuantizeOptions& options, GgufWriter& writer) {
  const std::vector<GgufTensorInfo>& infos = src.tensors();

  QuantizeSummary summary;
  summary.n_tensors = choices.size();
  std::vector<float> f32;       // the current tensor as F32 [nelements]
  std::vector<uint8_t> packed;  // the current tensor in its output type
  for (size_t i = 0; i < choices.size(); ++i) {
    const TensorChoice& c = choices[i];
    const GgufTensorInfo& t = infos[c.source_index];
    const std::span<const uint8_t> bytes = src.tensor_data(t);
    const int64_t n = t.nelements();

    std::span<const uint8_t> out = bytes;
    if (is_float_type(t.type)) {
      f32.resize(static_cast<size_t>(n));
      decode_floats(t.type, bytes, f32.data(), n);
      KILN_TRY(check_finite(t, f32.data(), n));
    }
    if (c.type != t.type) {
      KILN_ASSIGN_OR_RETURN(const float* importance, find_importance(options, t, summary.warnings));
      const int64_t n_per_row = t.ne[0];
      const int64_t nrows = t.ne[1];
      const int64_t n_matrices = t.ne[2] * t.ne[3];
      const size_t matrix_bytes = row_size(c.type, n_per_row) * static_cast<size_t>(nrows);
      packed.resize(matrix_bytes * static_cast<size_t>(n_matrices));
      // Each matrix (expert) has its own importance weights: row i2 of the [ne0, ne2] imatrix.
      for (int64_t m = 0; m < n_matrices; ++m) {
        const float* w = importance ? importance + (m % t.ne[2]) * n_per_row : nullptr;
        quantize_rows(c.type, f32.data() + m * n_per_row * nrows, packed.data() + m * matrix_bytes, nrows,
                      n_per_row, w, options.n_threads);
      }
      out = packed;
      ++summary.n_converted;
    }
    KILN_TRY(writer.write_tensor_data(out));

    summary.n_fallback += c.fell_back ? 1 : 0;
    summary.src_tensor_bytes += bytes.size();
    summary.dst_tensor_bytes += out.size();
    summary.n_elements += static_cast<uint64_t>(n);
    if (options.on_tensor) {
      options.on_tensor(TensorProgress{.index = i,
                                       .count = choices.size(),
                                       .name = t.name,
                                       .src_type = t.type,
                                       .dst_type = c.type,
                                       .src_bytes = bytes.size(),
                                       .dst_bytes = out.size(),
                                       .fell_back = c.fell_back});
    }
  }
  KILN_TRY(writer.finish());
  return summary;
}

// Writes `src`'s tensors as `choices` say, after `metadata` (set on the writer), into out_path.
Result<QuantizeSummary> write_file(const GgufFile& src, const std::vector<TensorChoice>& choices,
                                   const QuantizeOptions& options, const std::string& out_path,
                                   const std::function<void(GgufWriter&)>& metadata) {
  const std::vector<GgufTensorInfo>& infos = src.tensors();
  // Refuse conversions we cannot do before writing anything.
  for (const TensorChoice& c : choices) {
    const GgufTensorInfo& t = infos[c.source_index];
    if (c.type == t.type) continue;
    if (!is_float_type(t.type)) {
      return make_error("quantize: tensor '", t.name, "' is ", dtype_name(t.type), "; converting it to ",
                        dtype_name(c.type),
                        " is not supported (requantizing is refused, as llama.cpp does"
                        " by default: quantize from F32, F16 or BF16)");
    }
    KILN_ASSERT(quantize_supported(c.type), "the policy chose a type quantize_chunk cannot produce");
  }

  GgufWriter writer;
  metadata(writer);
  for (const TensorChoice& c : choices) {
    const GgufTensorInfo& t = infos[c.source_index];
    const std::span<const int64_t> ne(t.ne.data(), static_cast<size_t>(effective_dims(t.ne)));
    KILN_TRY(writer.add_tensor(t.name, c.type, ne));
  }
  KILN_TRY(writer.begin(out_path));
  auto summary = write_tensors(src, choices, options, writer);
  if (!summary.ok()) {
    std::error_code ignored;
    std::filesystem::remove(out_path, ignored);  // no partial file is left behind
  }
  return summary;
}

}  // namespace

Result<QuantizeSummary> quantize_gguf(const GgufFile& src, const std::string& out_path,
                                      const QuantizeOptions& options) {
  KILN_ASSIGN_OR_RETURN(const ModelHparams hp, read_hparams(src));
  const std::vector<GgufTensorInfo>& infos = src.tensors();
  std::vector<TensorDesc> descs;
  descs.reserve(infos.size());
  for (const GgufTensorInfo& t : infos)
    descs.push_back(TensorDesc{.name = t.name, .type = t.type, .ne = t.ne});
  KILN_ASSIGN_OR_RETURN(
      const std::vector<TensorChoice> choices,
      choose_types(hp, descs,
                   PolicyOptions{.preset = options.preset, .has_imatrix = options.imatrix != nullptr}));
  return write_file(src, choices, options, out_path,
                    [&](GgufWriter& w) { copy_metadata(src, options.preset.file_type, w); });
}

Result<QuantizeSummary> quantize_sd(const GgufFile& src, const std::string& out_path, DType type,
                                    const QuantizeOptions& options) {
  if (!quantize_supported(type))
    return make_error("quantize: ", dtype_name(type), " is not a type kiln writes");
  std::vector<TensorChoice> choices;
  choices.reserve(src.tensors().size());
  // ref: convert_tensor (model_loader.cpp): stable-diffusion.cpp always hands ggml_quantize_chunk
  // importance weights, all 1 when none were collected, which takes the weighted search of Q4_0,
  // Q4_1, Q5_0, Q5_1 and the K-quants (Q8_0 and F16 ignore them).
  ImportanceMap ones;
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const GgufTensorInfo& t = src.tensors()[i];
    const bool converted = sd_converts_tensor(t.name, t.ne, type) && t.type != type;
    choices.push_back(TensorChoice{.source_index = i, .type = converted ? type : t.type});
    if (converted) ones[t.name].assign(static_cast<size_t>(t.ne[0] * t.ne[2]), 1.0f);
  }
  QuantizeOptions with_ones = options;
  with_ones.imatrix = &ones;
  // No metadata, as stable-diffusion.cpp's convert writes none; its names are longer than llama.cpp's.
  return write_file(src, choices, with_ones, out_path,
                    [](GgufWriter& w) { w.set_max_tensor_name(gguf_format::kSdMaxTensorNameLength); });
}

}  // namespace kiln::quantize
