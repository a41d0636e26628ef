// render_chat_cases.mjs TEMPLATE_DIR OUT.json: renders every TEMPLATE_DIR/*.jinja with
// @huggingface/jinja for the richer scenarios below (tools and tool calls, multi-part content,
// extra variables, a conversation that breaks role rules), with and without the generation
// prompt, on the fixtures' fixed clock. A case the reference refuses (raise_exception or an
// unsupported construct) is written with `error` and its message.
//   NODE_PATH=/path/to/node_modules node render_chat_cases.mjs ../../data/templates chat_cases.json
import {createRequire} from "module";
const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const {Template} = require("@huggingface/jinja");
import fs from "fs";
import path from "path";
const FIXED = new Date(Date.UTC(2026, 0, 15, 9, 30, 0));
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) { if (a.length === 0) super(FIXED.getTime()); else super(...a); }
  static now() { return FIXED.getTime(); }
};
const weather = {type: "function", function: {name: "get_weather", description: "Current weather for a city",
  parameters: {type: "object", properties: {city: {type: "string", description: "City name"},
    unit: {type: "string", enum: ["c", "f"]}}, required: ["city"]}}};
const scenarios = {
  tools: {messages: [
      {role: "system", content: "You are a weather bot."},
      {role: "user", content: "Weather in Paris?"},
      {role: "assistant", content: "", tool_calls: [{id: "call00001", type: "function",
        function: {name: "get_weather", arguments: {city: "Paris", unit: "c"}}}]},
      {role: "tool", tool_call_id: "call00001", name: "get_weather", content: "{\"temp\": 21}"},
      {role: "assistant", content: "It is 21°C in Paris."},
      {role: "user", content: "Thanks!"}],
    tools: [weather]},
  parts: {messages: [
      {role: "user", content: [{type: "text", text: "First part."}, {type: "text", text: "Second part."}]},
      {role: "assistant", content: "Noted."},
      {role: "user", content: "Again"}]},
  extra: {messages: [{role: "system", content: "Sys"}, {role: "user", content: "Think?"},
      {role: "assistant", content: "Yes.", reasoning_content: "Let me think."}, {role: "user", content: "More"}],
    enable_thinking: false, reasoning_effort: "high", builtin_tools: ["browser"], custom_tools: [weather],
    tools_in_user_message: false, date_string: "15 Jan 2026", thinking: true},
  bad_roles: {messages: [{role: "user", content: "a"}, {role: "user", content: "b"}]},
};
const dir = process.argv[2];
const out = [];
for (const f of fs.readdirSync(dir).filter(f => f.endsWith(".jinja")).sort()) {
  const t = new Template(fs.readFileSync(path.join(dir, f), "utf8"));
  for (const [name, ctx] of Object.entries(scenarios)) {
    for (const agp of [true, false]) {
      const context = {...ctx, add_generation_prompt: agp, bos_token: "<s>", eos_token: "</s>"};
      const c = {template: f, scenario: name + (agp ? "+gen" : ""), context};
      try { c.expected = t.render(context); } catch (e) { c.error = String(e.message ?? e); }
      out.push(c);
    }
  }
}
fs.writeFileSync(process.argv[3], JSON.stringify(out, null, 1) + "\n");
console.log(out.length, "cases;", out.filter(c => c.error).length, "refused");
for (const c of out.filter(c => c.error)) console.log(" ", c.template, c.scenario, c.error.slice(0, 100));
