// Every JSON answer `kiln run -j` gives validates against its schema (ajv, a real validator):
// the schemas of ../data/schemas.json on the default model and the fixture models, greedy and
// sampled. The npm packages come from tests/server/node (`npm ci` there; scripts/test.sh runs it).
//   node json_schema_outputs.mjs KILN_BINARY SHARED_DIR
import {createRequire} from "module";
import {execFile} from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import {fileURLToPath} from "url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../server/node/package.json"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

const [kiln, modelsDir] = process.argv.slice(2);
if (!kiln || !modelsDir) {
  console.error("usage: node json_schema_outputs.mjs KILN_BINARY MODELS_DIR");
  process.exit(2);
}
const schemas = JSON.parse(fs.readFileSync(path.join(here, "../data/schemas.json"), "utf8"));
const models = [null, "llama-spm-e128-f32", "llama-spm-e256-Q4_0", "llama-spm-e256-Q4_K_M", "llama-spm-e256-Q6_K",
                "qwen2-e64-Q8_0", "qwen3-e64-Q8_0"];
const N_PREDICT = 384;

// Every schema on every model, greedy for one half and sampled (a fixed seed) for the other, the
// halves swapping from one model to the next; the default model and qwen2 (a byte-level BPE
// vocabulary) also run every schema both ways.
const runs = [];
models.forEach((model, m) => {
  schemas.forEach((s, i) => {
    const both = model === null || model === "qwen2-e64-Q8_0";
    if (both || (i + m) % 2 === 0) runs.push({model, schema: s, greedy: true});
    if (both || (i + m) % 2 === 1) runs.push({model, schema: s, greedy: false, seed: 1000 + i});
  });
});

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-schema-"));
const ajv = new Ajv2020({strict: false, allErrors: true});
addFormats(ajv);

function run(r) {
  const file = path.join(tmp, `${r.schema.name}.json`);
  if (!fs.existsSync(file)) fs.writeFileSync(file, JSON.stringify(r.schema.schema));
  const args = ["run", "-p", "Answer in JSON:", "-n", String(N_PREDICT), "--no-display-prompt", "-jf", file, "-t", "1"];
  if (r.model) args.push("-m", path.join(modelsDir, `${r.model}.gguf`));
  if (r.greedy) args.push("--temp", "0");
  else args.push("--temp", "0.9", "--seed", String(r.seed));
  return new Promise(resolve => {
    execFile(kiln, args, {maxBuffer: 1 << 24}, (err, stdout, stderr) => resolve({r, err, stdout, stderr}));
  });
}

function check({r, err, stdout, stderr}) {
  const what = `${r.model ?? "default model"} / ${r.schema.name} / ${r.greedy ? "greedy" : `seed ${r.seed}`}`;
  if (err) return `${what}: kiln failed: ${stderr.trim().split("\n").pop()}`;
  const m = stderr.match(/generated (\d+) tokens/);
  if (!m) return `${what}: no timing line in stderr`;
  if (Number(m[1]) >= N_PREDICT) return `${what}: not finished in ${N_PREDICT} tokens: ${stdout.slice(0, 200)}`;
  let value;
  try {
    value = JSON.parse(stdout);
  } catch (e) {
    return `${what}: not JSON (${e.message}): ${JSON.stringify(stdout)}`;
  }
  const validate = ajv.compile(r.schema.schema);
  if (!validate(value)) return `${what}: ${JSON.stringify(value)} fails: ${ajv.errorsText(validate.errors)}`;
  return null;
}

const failures = [];
let next = 0;
async function worker() {
  while (next < runs.length) {
    const r = runs[next++];
    const problem = check(await run(r));
    if (problem) failures.push(problem);
  }
}
await Promise.all(Array.from({length: Math.max(1, Math.min(4, os.cpus().length))}, worker));
fs.rmSync(tmp, {recursive: true, force: true});
for (const f of failures) console.error("FAIL", f);
console.log(`${runs.length - failures.length}/${runs.length} outputs of ${schemas.length} schemas validate`);
process.exit(failures.length ? 1 : 0);
