// Writes vocab_info.json: llama.cpp's special ids, end-of-generation set and a few detokenizations
// for each fixture vocabulary (node-llama-cpp 3.22.1's prebuilt llama.cpp).
//   NODE_PATH=/path/to/node_modules node tests/text/data/vocab_info.mjs SHARED_DIR > tests/text/data/vocab_info.json
import {createRequire} from "module";
const require = createRequire(process.env.NODE_PATH + "/");
const {getLlama} = await import(require.resolve("node-llama-cpp"));
const shared = process.argv[2];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const texts = ["Hello World! It's   done .", " leading space", "a 'quoted' word , and  ?", "<s>x</s>",
               "<|im_start|>hi<|im_end|>", "[CLS] Ünïcödé [SEP]"];
const out = {};
for (const v of ["llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "bert-bge"]) {
  const model = await llama.loadModel({modelPath: `${shared}/fixtures/vocab/ggml-vocab-${v}.gguf`, vocabOnly: true});
  const t = model.tokens;
  const eog = [];
  const n = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  for (let i = 0; i < n; i++) if (model.isEogToken(i)) eog.push(i);
  const detok = [];
  for (const text of texts) {
    for (const special of [false, true]) {
      const tokens = [...model.tokenize(text, special)];
      detok.push({text, special, tokens, detokenized: model.detokenize(tokens, special)});
    }
  }
  out[v] = {bos: t.bos, eos: t.eos, eot: t.eot, sep: t.sep, nl: t.nl, eog, detok};
}
console.log(JSON.stringify(out, null, 1));
