// The official OpenAI Node SDK (package.json pins the version) against a real `kiln serve`:
// chat completions (plain and streamed), completions, embeddings, tool calls (a round trip),
// response_format json_schema (validated with ajv), errors, an image and audio transcriptions,
// checked field by field; images.generate and images.edit against a server of a text and an image
// model, equal to `kiln image`'s files.
//
// Usage: node openai_sdk_test.mjs KILN_BINARY [MODEL]
//   KILN_BINARY  the `kiln` executable (or env KILN_BIN)
//   MODEL        the qwen2 test model (default: build/test-data/models/qwen2-e64-Q8_0.gguf of this
//                checkout, made by tools/fixtures/make_test_data.py)
// Registered with ctest (label server) by CMakeLists.txt; its packages come from `npm ci` in this
// folder (scripts/test.sh runs it). The script starts the server itself on a free port and kills it
// when it ends, on failure too.
import { spawn, spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!existsSync(path.join(here, 'node_modules', 'openai'))) {
  console.error(`openai_sdk_test: the npm packages are missing: run 'npm ci' in ${here} (scripts/test.sh does)`);
  process.exit(1);
}
const { default: OpenAI, toFile } = await import('openai');

const kilnBin = process.argv[2] ?? process.env.KILN_BIN;
if (!kilnBin || !existsSync(kilnBin)) {
  console.error(`openai_sdk_test: no kiln binary (got '${kilnBin ?? ''}'): pass it as the first argument`);
  process.exit(1);
}
// qwen2 fixture: a random-weight model with the real Qwen2 vocabulary; its embedding width is 64.
const kModel = process.argv[3] ?? path.resolve(here, '../../../build/test-data/models/qwen2-e64-Q8_0.gguf');
const kEmbd = 64;
const kStartTimeoutMs = 60_000;

const servers = [];  // the child processes
let baseURL = '';
let client = null;
let servedModel = '';  // the id /v1/models reports: every response must name it
let serverLog = '';

function killServer() {
  for (const server of servers)
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
}
process.on('exit', killServer);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killServer();
    process.exit(1);
  });
}

// Starts `kiln serve --port 0 ARGS`, reads the bound port from its log, then waits for /health 200.
async function startServer(args) {
  const server = spawn(kilnBin, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  servers.push(server);
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kiln serve printed no port in time:\n${serverLog}`)),
                             kStartTimeoutMs);
    server.stderr.setEncoding('utf8');
    let log = '';  // this server's own output: its port
    server.stderr.on('data', (text) => {
      serverLog += text;
      log += text;
      const m = log.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.on('exit', (code, signal) => reject(new Error(`kiln serve exited (${code ?? signal}):\n${serverLog}`)));
  });
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + kStartTimeoutMs;
  for (;;) {
    const status = await fetch(`${origin}/health`).then((r) => r.status, () => 0);
    if (status === 200) break;
    assert.ok(status === 0 || status === 503, `/health answered ${status} while loading`);
    assert.ok(Date.now() < deadline, `/health did not answer 200 within ${kStartTimeoutMs} ms:\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return origin;
}

before(async () => {
  const origin = await startServer(['-m', kModel, '-c', '1024', '-t', '2', '--parallel', '2', '--embeddings']);
  baseURL = `${origin}/v1`;
  // No retries: every answer the server gives must be the one the test sees.
  client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
});

after(() => killServer());

const kMessages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Name three rivers.' },
];

function assertUsage(usage, maxCompletion) {
  assert.ok(usage, 'usage is present');
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0, `prompt_tokens ${usage.prompt_tokens}`);
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens > 0 &&
              usage.completion_tokens <= maxCompletion,
            `completion_tokens ${usage.completion_tokens} (max ${maxCompletion})`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

test('models.list names the loaded model', async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].object, 'model');
  assert.equal(typeof models[0].id, 'string');
  assert.ok(models[0].id.length > 0);
  servedModel = models[0].id;
});

test('chat.completions.create, not streamed', async () => {
  const r = await client.chat.completions.create({
    model: 'any-name-is-served-by-the-loaded-model', messages: kMessages, max_tokens: 12, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.ok(Number.isInteger(r.created) && Math.abs(r.created - Date.now() / 1000) < 120, `created ${r.created}`);
  assert.equal(r.model, servedModel);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
  assertUsage(r.usage, 12);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
});

test('chat.completions.create, streamed with usage, equals the plain answer at temperature 0', async () => {
  const request = { model: 'x', messages: kMessages, max_tokens: 16, temperature: 0 };
  const plain = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({
    ...request, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let role = null;
  let finish = null;
  let usage = null;
  let chunks = 0;
  let id = null;
  for await (const chunk of stream) {
    ++chunks;
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.model, servedModel);
    id ??= chunk.id;
    assert.equal(chunk.id, id, 'every chunk carries the same id');
    assert.equal(usage, null, 'the usage chunk comes last');
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, [], 'the usage chunk has no choices');
      usage = chunk.usage;
      continue;
    }
    assert.equal(chunk.choices.length, 1);
    const c = chunk.choices[0];
    assert.equal(finish, null, 'nothing follows the finish_reason chunk but usage');
    if (c.delta.role !== undefined) {
      assert.equal(role, null, 'the role comes once');
      assert.equal(chunks, 1, 'the role comes in the first chunk');
      role = c.delta.role;
    }
    if (typeof c.delta.content === 'string') content += c.delta.content;
    if (c.finish_reason !== null) finish = c.finish_reason;
  }
  assert.ok(chunks >= 3, `${chunks} chunks`);
  assert.equal(role, 'assistant');
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(content, plain.choices[0].message.content);
  assertUsage(usage, 16);
  assert.equal(usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

test('n = 2 gives two choices; at temperature 0 both are the single answer', async () => {
  const request = { model: 'x', messages: kMessages, max_tokens: 6, temperature: 0 };
  const one = await client.chat.completions.create(request);
  const two = await client.chat.completions.create({ ...request, n: 2 });
  assert.equal(two.choices.length, 2);
  two.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, one.choices[0].message.content);
    assert.equal(c.finish_reason, one.choices[0].finish_reason);
  });
  assert.equal(two.usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(two.usage.completion_tokens, 2 * one.usage.completion_tokens);
});

test('chat content parts are accepted as text', async () => {
  const parts = await client.chat.completions.create({
    model: 'x', max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three rivers.' }] }],
  });
  const plain = await client.chat.completions.create({
    model: 'x', max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: 'Name three rivers.' }],
  });
  assert.equal(parts.choices[0].message.content, plain.choices[0].message.content);
  assert.equal(parts.usage.prompt_tokens, plain.usage.prompt_tokens);
});

test('temperature 0 answers are equal across calls', async () => {
  const request = { model: 'x', messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24,
                    temperature: 0 };
  const a = await client.chat.completions.create(request);
  const b = await client.chat.completions.create(request);
  assert.ok(a.choices[0].message.content.length > 0);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(a.usage.completion_tokens, b.usage.completion_tokens);
});

test('completions.create: text, finish_reason length, usage', async () => {
  const r = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 10,
                                              temperature: 0, logit_bias: {} });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, servedModel);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  // A random-weight model rarely ends on its own within 10 tokens; when it does, 'stop' is right.
  if (r.choices[0].finish_reason === 'length') {
    assert.equal(r.usage.completion_tokens, 10);
  } else {
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
  assertUsage(r.usage, 10);
});

test('completions.create: finish_reason length at max_tokens', async () => {
  // A greedy run that made more than n tokens: asked for n, exactly n come back, as its prefix.
  const long = await client.completions.create({ model: 'x', prompt: 'The river', max_tokens: 40, temperature: 0 });
  const n = Math.min(4, long.usage.completion_tokens - 1);
  assert.ok(n >= 1, `the greedy run made ${long.usage.completion_tokens} tokens`);
  const r = await client.completions.create({ model: 'x', prompt: 'The river', max_tokens: n, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, n);
  assert.ok(long.choices[0].text.startsWith(r.choices[0].text), 'a shorter greedy run is a prefix of a longer one');
});

test('completions.create: stop strings end the text before them', async () => {
  const base = await client.completions.create({ model: 'x', prompt: 'In the beginning', max_tokens: 32,
                                                 temperature: 0 });
  const text = base.choices[0].text;
  // A stop string from the middle of the greedy text, free of replacement characters (pieces cut
  // inside a UTF-8 character) and long enough to span tokens.
  let stop = '';
  for (let at = Math.floor(text.length / 3); at + 4 <= text.length && !stop; ++at) {
    const s = text.slice(at, at + 4);
    if (!s.includes('\uFFFD') && s.trim().length > 0) stop = s;
  }
  assert.ok(stop.length > 0, `no usable stop string in ${JSON.stringify(text)}`);
  const expected = text.slice(0, text.indexOf(stop));
  for (const form of [stop, ['never-generated-zzz', stop]]) {
    const r = await client.completions.create({ model: 'x', prompt: 'In the beginning', max_tokens: 32,
                                                temperature: 0, stop: form });
    assert.equal(r.choices[0].finish_reason, 'stop', `stop ${JSON.stringify(form)}`);
    assert.equal(r.choices[0].text, expected, `stop ${JSON.stringify(form)} in ${JSON.stringify(text)}`);
  }
  // Streamed: the same text, and the stop string never leaks in a chunk.
  const stream = await client.completions.create({ model: 'x', prompt: 'In the beginning', max_tokens: 32,
                                                   temperature: 0, stop, stream: true });
  let streamed = '';
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    streamed += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(streamed, expected);
  assert.equal(finish, 'stop');
});

// Embeddings, to OpenAI's documented shape: {object: "list", data: [{object: "embedding", index,
// embedding}], model, usage: {prompt_tokens, total_tokens}}; kiln normalises (L2 norm 1).
function checkEmbeddingList(r, n) {
  assert.equal(r.object, 'list');
  assert.equal(r.model, servedModel);
  assert.equal(r.data.length, n);
  r.data.forEach((d, i) => {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
  });
  assert.ok(Number.isInteger(r.usage.prompt_tokens) && r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
}

function checkVector(v) {
  assert.equal(v.length, kEmbd, `dimensions ${v.length}, n_embd ${kEmbd}`);
  assert.ok(v.every(Number.isFinite));
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-4, `L2 norm ${norm}`);
}

test('embeddings.create: float, base64 and the SDK default decode to the same vectors', async () => {
  const input = ['The quick brown fox', 'jumps over the lazy dog'];
  const asFloat = await client.embeddings.create({ model: 'x', input, encoding_format: 'float' });
  checkEmbeddingList(asFloat, 2);
  asFloat.data.forEach((d) => checkVector(d.embedding));
  assert.notDeepEqual(asFloat.data[0].embedding, asFloat.data[1].embedding);

  const asBase64 = await client.embeddings.create({ model: 'x', input, encoding_format: 'base64' });
  checkEmbeddingList(asBase64, 2);
  assert.deepEqual(asBase64.usage, asFloat.usage);
  asBase64.data.forEach((d, i) => {
    assert.equal(typeof d.embedding, 'string');
    const bytes = Buffer.from(d.embedding, 'base64');
    assert.equal(bytes.length, kEmbd * 4, 'little-endian float32 values');
    const decoded = Array.from({ length: kEmbd }, (_, k) => bytes.readFloatLE(k * 4));
    // JSON floats round-trip float32 exactly when printed with enough digits; allow the last bit.
    decoded.forEach((x, k) => {
      const f = asFloat.data[i].embedding[k];
      assert.ok(Math.abs(x - f) <= 1e-6 * Math.max(1, Math.abs(f)), `[${i}][${k}] base64 ${x} float ${f}`);
    });
  });

  // No encoding_format: the SDK asks for base64 and decodes it itself.
  const byDefault = await client.embeddings.create({ model: 'x', input: input[0] });
  checkEmbeddingList(byDefault, 1);
  checkVector(byDefault.data[0].embedding);
  byDefault.data[0].embedding.forEach((x, k) => {
    const f = asFloat.data[0].embedding[k];
    assert.ok(Math.abs(x - f) <= 1e-6 * Math.max(1, Math.abs(f)), `[${k}] ${x} vs ${f}`);
  });
});

const kWeatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};

test('tool calls: a required call, streamed alike, its result sent back, then an answer', async () => {
  const { default: Ajv } = await import('ajv');
  const validate = new Ajv({ strict: false }).compile(kWeatherTool.function.parameters);
  const messages = [{ role: 'user', content: 'What is the weather in Oslo?' }];
  const request = { model: 'x', messages, tools: [kWeatherTool], tool_choice: 'required', temperature: 0, max_tokens: 200 };
  const r = await client.chat.completions.create(request);
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.ok(typeof call.id === 'string' && call.id.length > 0);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);

  // Streamed: the SDK puts the deltas together into the same call.
  const stream = client.chat.completions.stream(request);
  const streamed = await stream.finalChatCompletion();
  assert.equal(streamed.choices[0].finish_reason, 'tool_calls');
  const sc = streamed.choices[0].message.tool_calls;
  assert.equal(sc.length, 1);
  assert.equal(sc[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(sc[0].function.arguments), args);

  // The call and its result in the conversation; the model answers in text.
  const followUp = await client.chat.completions.create({
    model: 'x', temperature: 0, max_tokens: 12, tools: [kWeatherTool], tool_choice: 'none',
    messages: [...messages, c.message, { role: 'tool', tool_call_id: call.id, content: 'Rain, 4 degrees.' }],
  });
  const answer = followUp.choices[0];
  assert.equal(typeof answer.message.content, 'string');
  assert.ok(!answer.message.tool_calls || answer.message.tool_calls.length === 0);
  assert.ok(['stop', 'length'].includes(answer.finish_reason), `finish_reason ${answer.finish_reason}`);
});

test('response_format json_schema: the content validates', async () => {
  const { default: Ajv } = await import('ajv');
  const schema = kWeatherTool.function.parameters;
  const validate = new Ajv({ strict: false }).compile(schema);
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({
      model: 'x', messages: kMessages, temperature, seed: 5, max_tokens: 200,
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema } },
    });
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(validate(value), `${r.choices[0].message.content}: ${JSON.stringify(validate.errors)}`);
  }
});

test('a 400 surfaces as BadRequestError with the server message', async () => {
  const cases = [
    [{ model: 'x', messages: kMessages, max_tokens: 0 }, /max_tokens/],
    [{ model: 'x', messages: kMessages, n: 1000, max_tokens: 4 }, /'n'/],
    [{ model: 'x', messages: kMessages, response_format: { type: 'json_schema', json_schema: { name: 's' } } },
     /response_format/],
    [{ model: 'x', messages: [] }, /messages/],
    [{ model: 'x', messages: kMessages, tools: [{ type: 'retrieval' }] },
     /tools/],
    [{ model: 'x', messages: [{ role: 'user', content: 'word '.repeat(4000) }] }, /prompt/],
  ];
  for (const [request, message] of cases) {
    // max_tokens 4 keeps an unexpected success short.
    await assert.rejects(client.chat.completions.create({ max_tokens: 4, ...request }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 400);
      assert.equal(err.type, 'invalid_request_error');
      assert.match(err.message, message);
      assert.match(err.error.message, message);
      return true;
    });
  }
  await assert.rejects(client.completions.create({ model: 'x', prompt: 'hi', temperature: 'hot' }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
    assert.match(err.message, /temperature/);
    return true;
  });
});

test('an image_url content part (data: URL) gets an answer from a server with --mmproj', async () => {
  // The llama fixture with the gemma3 projector of tests/conformance/data/mtmd (embedding width 128).
  const mtmd = path.resolve(here, '../../conformance/data/mtmd');
  const origin = await startServer(['-m', path.resolve(here, '../../../build/test-data/models/llama-spm-e128-f32.gguf'),
                                    '--mmproj', path.join(mtmd, 'mmproj-gemma3.gguf'), '-c', '512', '-t', '2',
                                    '--parallel', '1']);
  const vision = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  const png = readFileSync(path.join(mtmd, 'test-224.png')).toString('base64');
  const content = [{ type: 'text', text: 'What is in this image?' },
                   { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }];
  const r = await vision.chat.completions.create({ model: 'x', messages: [{ role: 'user', content }], max_tokens: 6,
                                                   temperature: 0 });
  assert.ok(r.choices[0].message.content.length > 0);
  assertUsage(r.usage, 6);
  assert.ok(r.usage.prompt_tokens > 16, `the image's 16 positions count: ${r.usage.prompt_tokens}`);
  await assert.rejects(vision.chat.completions.create({
    model: 'x', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: 'data:image/png;base64,aGVsbG8=' } }] }],
  }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
    assert.match(err.message, /image 0: image:/);
    return true;
  });
});

test('audio.transcriptions.create answers what the chat route answers for the same audio', async () => {
  // The llama fixture with the qwen2a audio projector of tests/conformance/data/mtmd-audio.
  const origin = await startServer(['-m', path.resolve(here, '../../../build/test-data/models/llama-spm-e128-f32.gguf'),
                                    '--mmproj', path.resolve(here, '../../conformance/data/mtmd-audio/mmproj-qwen2a.gguf'),
                                    '-c', '1024', '-t', '2', '--parallel', '1']);
  const audio = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  const wav = readFileSync(path.resolve(here, '../../data/audio/voiced-16k.wav'));
  // llama-server's transcription message: the default prompt, then the audio.
  const chat = await audio.chat.completions.create({
    model: 'x', max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: [
      { type: 'text', text: 'Transcribe audio to text' },
      { type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }],
  });
  const want = chat.choices[0].message.content;
  assert.ok(want.length > 0);
  // max_tokens is no OpenAI transcription field: the SDK sends it as a form field all the same.
  const file = () => toFile(wav, 'voiced-16k.wav', { type: 'audio/wav' });
  const r = await audio.audio.transcriptions.create({ file: await file(), model: 'x', temperature: 0, max_tokens: 8 });
  assert.equal(r.text, want);
  assert.equal(r.usage.type, 'tokens');
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
  const text = await audio.audio.transcriptions.create({ file: await file(), model: 'x', temperature: 0,
                                                         max_tokens: 8, response_format: 'text' });
  assert.equal(text, want);
  const stream = await audio.audio.transcriptions.create({ file: await file(), model: 'x', temperature: 0,
                                                           max_tokens: 8, stream: true });
  let deltas = '';
  let done = null;
  for await (const event of stream) {
    assert.equal(done, null, 'nothing follows transcript.text.done');
    if (event.type === 'transcript.text.delta') deltas += event.delta;
    else if (event.type === 'transcript.text.done') done = event;
  }
  assert.equal(deltas, want);
  assert.equal(done?.text, want);
  // A broken file is the server's 400, as BadRequestError.
  await assert.rejects(audio.audio.transcriptions.create({ file: await toFile(Buffer.from('RIFF'), 'a.wav'),
                                                         model: 'x' }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
    assert.match(err.message, /audio 0: /);
    return true;
  });
});

test('images.generate and images.edit return the images kiln image writes', async () => {
  // The tiny SD 1.x checkpoint with TAESD (a preset names its decoder) beside the qwen2 fixture.
  const sd = path.resolve(here, '../../../build/test-data/sd');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kiln-sdk-images-'));
  try {
    const preset = path.join(dir, 'models.ini');
    writeFileSync(preset, `[sd]\nmodel = ${path.join(sd, 'tiny-sd1-f32.safetensors')}\n` +
                          `taesd = ${path.join(sd, 'taesd-f32.safetensors')}\n`);
    const origin = await startServer(['-m', `chat=${kModel}`, '--models-preset', preset, '-t', '2']);
    const images = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
    const kilnImage = (args, out) => {
      const r = spawnSync(kilnBin, ['image', '-m', path.join(sd, 'tiny-sd1-f32.safetensors'), '--taesd',
                                    path.join(sd, 'taesd-f32.safetensors'), '-W', '64', '-H', '64', '--steps', '2',
                                    ...args, '-o', out], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return readFileSync(out);
    };
    const want = kilnImage(['-p', 'a red cat', '-s', '11'], path.join(dir, 'want.png'));
    // steps and seed are kiln's extensions: the SDK sends them as they are.
    const r = await images.images.generate({ model: 'sd', prompt: 'a red cat', size: '64x64', n: 1,
                                             response_format: 'b64_json', steps: 2, seed: 11 });
    assert.ok(Number.isInteger(r.created));
    assert.equal(r.data.length, 1);
    assert.ok(Buffer.from(r.data[0].b64_json, 'base64').equals(want), 'the image equals kiln image\'s');
    const init = path.join(dir, 'init.png');
    writeFileSync(init, want);
    const edited = kilnImage(['-p', 'a blue cat', '-s', '5', '-i', init, '--strength', '0.5'],
                             path.join(dir, 'edited.png'));
    const e = await images.images.edit({ model: 'sd', prompt: 'a blue cat', image: await toFile(want, 'cat.png',
                                         { type: 'image/png' }), steps: 2, seed: 5, strength: 0.5 });
    assert.ok(Buffer.from(e.data[0].b64_json, 'base64').equals(edited), 'the edit equals kiln image -i\'s');
    // A url answer is refused with the reason; a chat model named for an image is a 400 too.
    for (const [body, message] of [[{ model: 'sd', prompt: 'x', response_format: 'url' }, /stores no images/],
                                   [{ model: 'chat', prompt: 'x' }, /is a text model/]]) {
      await assert.rejects(images.images.generate(body), (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
        assert.match(err.message, message);
        return true;
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
