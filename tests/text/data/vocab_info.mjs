// Writes vocab_info.json: llama.cpp's special ids, BOS/EOS flags, end-of-generation set and a few
// detokenizations for every vocabulary ggml-vocab-NAME.gguf in VOCAB_DIR (node-llama-cpp 3.22.1's
// prebuilt llama.cpp). tests/text/data/make_refs.sh runs it:
//   NODE_PATH=/path/to/node_modules node tests/text/data/vocab_info.mjs VOCAB_DIR > tests/text/data/vocab_info.json
import {createRequire} from "module";
import fs from "fs";
const require = createRequire(process.env.NODE_PATH + "/");
const {getLlama} = await import(require.resolve("node-llama-cpp"));
const dir = process.argv[2];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const texts = ["Hello World! It's   done .", " leading space", "a 'quoted' word , and  ?", "<s>x</s>",
               "<|im_start|>hi<|im_end|>", "[CLS] Ünïcödé [SEP]", "  two  spaces  \n\nand lines\n",
               "<mask> <start_of_turn>ＦＵＬＬ ｗｉｄｔｈ<end_of_turn>", "emoji 🦙 and bytes \u0001"];
const out = {};
const names = fs.readdirSync(dir).filter(f => /^ggml-vocab-.*\.gguf$/.test(f)).sort();
for (const file of names) {
  const v = file.slice("ggml-vocab-".length, -".gguf".length);
  const model = await llama.loadModel({modelPath: `${dir}/${file}`, vocabOnly: true});
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
  // llama_vocab_get_add_bos / _eos through the addon (the public getters also require a BOS token)
  out[v] = {bos: t.bos, eos: t.eos, eot: t.eot, sep: t.sep, nl: t.nl, add_bos: model._model.shouldPrependBosToken(),
            add_eos: model._model.shouldAppendEosToken(), eog, detok};
  await model.dispose();
}
console.log(JSON.stringify(out, null, 1));
