// Reference embeddings from llama.cpp (node-llama-cpp 3.22.1's prebuilt CPU build) for kiln's
// embedding tests (tests/llm/embeddings_test.cpp).
//
//   NODE_PATH=/tmp/oracle-embed/node_modules node tests/llm/data/embed_ref.mjs MODEL.gguf ARCH > REF.json
//
// On a CPU with AMX, first copy the node_modules folder and delete the
// @node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-sapphirerapids.so variant from the copy, so
// that llama.cpp picks an AVX-512 variant (the arithmetic kiln follows).
//
// For each text and each pooling, REF.json holds the tokens llama.cpp evaluated (BOS/EOS added as
// node-llama-cpp does) and the raw (not normalised) vector llama.cpp returned. node-llama-cpp's
// LlamaEmbeddingContext does not choose a pooling: llama.cpp takes the model's {arch}.pooling_type
// (absent: none), and with none node-llama-cpp returns the last token's hidden state
// (llama_get_embeddings_ith(ctx, -1)). The other poolings are obtained by overriding
// {arch}.pooling_type in the metadata (1 mean, 2 cls, 3 last): llama.cpp then pools in its graph
// and node-llama-cpp returns llama_get_embeddings_seq(ctx, 0).
// Context: F16 KV cache (llama.cpp's default), no flash attention.
import {createRequire} from "module";
const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const {getLlama} = await import(require.resolve("node-llama-cpp"));

const [modelPath, arch] = process.argv.slice(2);
if (!modelPath || !arch) {
    console.error("usage: node embed_ref.mjs MODEL.gguf ARCH > REF.json");
    process.exit(2);
}
const texts = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "In the beginning God created the heaven and the earth. And the earth was without form, and void.",
    "kiln embeddings: 12345 + ünïcödé ✓",
];
const poolings = [["none", null], ["mean", 1], ["cls", 2], ["last", 3]];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const out = {model: modelPath, engine: "llama.cpp via node-llama-cpp 3.22.1", system_info: llama.systemInfo,
             kv_type: "F16", flash_attention: false, poolings: {}};
for (const [name, type] of poolings) {
    const metadataOverrides = type === null ? undefined : {[arch]: {pooling_type: type}};
    const model = await llama.loadModel({modelPath, defaultContextFlashAttention: false, metadataOverrides});
    const ctx = await model.createEmbeddingContext({contextSize: 256, batchSize: 256, threads: 2});
    const cases = [];
    for (const text of texts) {
        const e = await ctx.getEmbeddingFor(text);
        const tokens = model.tokenize(text);
        ctx._prepareInput(tokens);  // BOS / EOS as getEmbeddingFor adds them
        cases.push({text, tokens: [...tokens], vector: [...e.vector]});
    }
    out.poolings[name] = cases;
    await ctx.dispose();
    await model.dispose();
}
process.stdout.write(JSON.stringify(out) + "\n");
await llama.dispose();
