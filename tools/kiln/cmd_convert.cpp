// `kiln convert HF_FOLDER OUT.gguf [--outtype f32|f16|bf16|q8_0]`
#include <cstdio>
#include <cstring>
#include <string>

#include "command.h"
#include "convert/converter.h"

namespace kiln::cli {
namespace {

void print_convert_usage() {
  std::printf(
      "usage: kiln convert HF_FOLDER OUT.gguf [--outtype f32|f16|bf16|q8_0]\n\n"
      "Converts a Hugging Face checkpoint folder (config.json, model.safetensors or sharded\n"
      "model-*.safetensors with model.safetensors.index.json, tokenizer.model or tokenizer.json,\n"
      "tokenizer_config.json) to GGUF as llama.cpp's convert_hf_to_gguf.py does.\n"
      "Architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.\n"
      "--outtype: type of the 2-D weights (default f16); 1-D tensors and norms stay f32.\n");
}

int run_convert(int argc, char** argv) {
  convert::ConvertOptions opts;
  std::string positional[2];
  int n_positional = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_convert_usage();
      return 0;
    }
    if (a == "--outtype") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln convert: --outtype needs a value\n");
        return 2;
      }
      auto t = convert::parse_out_type(argv[++i]);
      if (!t.ok()) {
        std::fprintf(stderr, "kiln %s\n", t.error().message.c_str());
        return 2;
      }
      opts.out_type = *t;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln convert: unknown option '%s'\n", a.c_str());
      print_convert_usage();
      return 2;
    } else if (n_positional < 2) {
      positional[n_positional++] = a;
    } else {
      std::fprintf(stderr, "kiln convert: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (n_positional != 2) {
    print_convert_usage();
    return 2;
  }
  opts.hf_dir = positional[0];
  opts.out_path = positional[1];
  opts.progress = true;
  auto r = convert::convert_hf_checkpoint(opts);
  if (!r.ok()) {
    std::fprintf(stderr, "kiln %s\n", r.error().message.c_str());
    return 1;
  }
  std::printf("wrote %s: %s, %lld tensors, %.2f MiB of tensor data\n", opts.out_path.c_str(), r->gguf_arch.c_str(),
              static_cast<long long>(r->n_tensors), static_cast<double>(r->data_bytes) / (1024.0 * 1024.0));
  return 0;
}

}  // namespace

KILN_COMMAND(convert, "convert a Hugging Face checkpoint folder to GGUF", run_convert);

}  // namespace kiln::cli
