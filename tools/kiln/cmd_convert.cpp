// `kiln convert HF_FOLDER OUT.gguf [--outtype f32|f16|bf16|q8_0]`
#include <cstdio>
#include <string>

#include "command.h"
#include "convert/converter.h"
#include "messages.h"
#include "options.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

int run_convert(int argc, char** argv) {
  convert::ConvertOptions opts;
  OptionParser p("convert", "kiln convert HF_FOLDER OUT.gguf [--outtype f32|f16|bf16|q8_0]");
  p.description(
      "Converts a Hugging Face checkpoint folder to GGUF as llama.cpp's convert_hf_to_gguf.py does.\n"
      "Architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.");
  p.argument(&opts.hf_dir, "HF_FOLDER",
             "config.json, model.safetensors (or model-*.safetensors with model.safetensors.index.json), "
             "tokenizer.model or tokenizer.json, tokenizer_config.json");
  p.argument(&opts.out_path, "OUT.gguf", "the GGUF file to write");
  p.custom(
      {"--outtype"},
      [&opts](const std::string& v) -> std::string {
        auto t = convert::parse_out_type(v);
        if (!t.ok()) return "'" + v + "' is not f32, f16, bf16 or q8_0";
        opts.out_type = *t;
        return "";
      },
      "TYPE", "type of the 2-D weights: f32, f16 (default), bf16 or q8_0; 1-D tensors and norms stay f32");
  if (auto code = p.parse(argc, argv)) return *code;
  if (const Status st = check_output_path(opts.out_path); !st.ok())
    return fail("convert", st.error().message);
  opts.progress = true;
  auto r = convert::convert_hf_checkpoint(opts);
  if (!r.ok()) return fail("convert", r.error().message);
  std::printf("wrote %s: %s, %lld tensors, %.2f MiB of tensor data\n", opts.out_path.c_str(), r->gguf_arch.c_str(),
              static_cast<long long>(r->n_tensors), static_cast<double>(r->data_bytes) / (1024.0 * 1024.0));
  return 0;
}

}  // namespace

KILN_COMMAND(convert, "convert a Hugging Face checkpoint folder to GGUF", run_convert);

}  // namespace kiln::cli
