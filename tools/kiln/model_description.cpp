#include "model_description.h"

#include <map>

namespace kiln::cli {
namespace {

// ref: llama.cpp src/models/{llama,qwen2,qwen3}.cpp (load_arch_hparams), llm_type_name.
std::string size_class(const HParams& h) {
  const int64_t n_layer = h.n_layer;
  switch (h.arch) {
    case Arch::Llama:
      switch (n_layer) {
        case 16:
        case 22:
          return "1B";
        case 26:
        case 28:
          return "3B";
        case 30:
          return "256M";
        case 32:
          return h.n_vocab == 49152 ? "3B" : h.n_vocab < 40000 ? "7B" : "8B";
        case 36:
          return "8B";
        case 40:
          return "13B";
        case 48:
          return "34B";
        case 60:
          return "30B";
        case 80:
          return h.n_head == h.n_head_kv ? "65B" : "70B";
        default:
          return "?B";
      }
    case Arch::Qwen2:
      switch (n_layer) {
        case 24:
          return h.n_embd == 1024 ? "0.5B" : "1B";
        case 28:
          return h.n_embd == 1536 ? "1.5B" : "7B";
        case 32:
          return "7B";
        case 36:
          return "3B";
        case 40:
          return h.n_head == 20 ? "4B" : "13B";
        case 48:
          return "14B";
        case 64:
          return "32B";
        case 80:
          return "70B";
        default:
          return "?B";
      }
    case Arch::Qwen3:
      switch (n_layer) {
        case 28:
          return h.n_embd == 1024 ? "0.6B" : "1.7B";
        case 36:
          return h.n_embd == 2560 ? "4B" : "8B";
        case 40:
          return "14B";
        case 64:
          return "32B";
        default:
          return "?B";
      }
  }
  return "?B";
}

// general.file_type values (llama.h's llama_ftype) and llama_ftype_name's names.
const char* ftype_name(uint32_t ftype) {
  static const std::map<uint32_t, const char*> names = {
      {0, "all F32"},
      {1, "F16"},
      {2, "Q4_0"},
      {3, "Q4_1"},
      {7, "Q8_0"},
      {8, "Q5_0"},
      {9, "Q5_1"},
      {10, "Q2_K - Medium"},
      {11, "Q3_K - Small"},
      {12, "Q3_K - Medium"},
      {13, "Q3_K - Large"},
      {14, "Q4_K - Small"},
      {15, "Q4_K - Medium"},
      {16, "Q5_K - Small"},
      {17, "Q5_K - Medium"},
      {18, "Q6_K"},
      {19, "IQ2_XXS - 2.0625 bpw"},
      {20, "IQ2_XS - 2.3125 bpw"},
      {21, "Q2_K - Small"},
      {22, "IQ3_XS - 3.3 bpw"},
      {23, "IQ3_XXS - 3.0625 bpw"},
      {24, "IQ1_S - 1.5625 bpw"},
      {25, "IQ4_NL - 4.5 bpw"},
      {26, "IQ3_S - 3.4375 bpw"},
      {27, "IQ3_S mix - 3.66 bpw"},
      {28, "IQ2_S - 2.5 bpw"},
      {29, "IQ2_M - 2.7 bpw"},
      {30, "IQ4_XS - 4.25 bpw"},
      {31, "IQ1_M - 1.75 bpw"},
      {32, "BF16"},
      {36, "TQ1_0 - 1.69 bpw ternary"},
      {37, "TQ2_0 - 2.06 bpw ternary"},
      {38, "MXFP4 MoE"},
  };
  const auto it = names.find(ftype);
  return it == names.end() ? "unknown, may not work" : it->second;
}

// The file type llama.cpp guesses without general.file_type: that of the most common tensor type
// (llama_model_loader's guess; K-quants as their "Medium" mix).
uint32_t guessed_ftype(const GgufFile& file) {
  std::map<DType, int> counts;
  for (const GgufTensorInfo& t : file.tensors()) ++counts[t.type];
  DType most = DType::F32;
  int best = -1;
  for (const auto& [type, n] : counts) {
    if (n > best) {
      best = n;
      most = type;
    }
  }
  static const std::map<DType, uint32_t> ftypes = {
      {DType::F32, 0},     {DType::F16, 1},     {DType::BF16, 32},    {DType::Q4_0, 2},
      {DType::Q4_1, 3},    {DType::Q5_0, 8},    {DType::Q5_1, 9},     {DType::Q8_0, 7},
      {DType::Q2_K, 10},   {DType::Q3_K, 12},   {DType::Q4_K, 15},    {DType::Q5_K, 17},
      {DType::Q6_K, 18},   {DType::IQ4_NL, 25}, {DType::IQ4_XS, 30},  {DType::IQ2_XXS, 19},
      {DType::IQ2_XS, 20}, {DType::IQ2_S, 28},  {DType::IQ3_XXS, 23}, {DType::IQ3_S, 26},
      {DType::IQ1_S, 24},  {DType::IQ1_M, 31},  {DType::TQ1_0, 36},
  };
  const auto it = ftypes.find(most);
  return it == ftypes.end() ? 0xffffffffu : it->second;
}

}  // namespace

std::string model_description(const Model& model) {
  const GgufFile& file = model.file();
  auto ftype = file.get_u32("general.file_type");
  const std::string type =
      ftype.ok() ? ftype_name(*ftype) : "(guessed) " + std::string(ftype_name(guessed_ftype(file)));
  return std::string(arch_name(model.hparams().arch)) + " " + size_class(model.hparams()) + " " + type;
}

}  // namespace kiln::cli
