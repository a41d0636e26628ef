// render_cases.mjs IN.json OUT.json (may be the same file): renders every case of IN.json ({name, template, context})
// with @huggingface/jinja, the reference renderer of kiln's template tests, on the fixtures'
// fixed clock (2026-01-15 09:30 UTC), and writes the cases with `expected` (the text) or
// `error` (true when the reference renderer refuses the case) to OUT.json.
//   NODE_PATH=/work/oracle/node_modules node render_cases.mjs cases.json cases.json
import {createRequire} from "module";
const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const {Template} = require("@huggingface/jinja");
import fs from "fs";
const FIXED = new Date(Date.UTC(2026, 0, 15, 9, 30, 0));
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) { if (a.length === 0) super(FIXED.getTime()); else super(...a); }
  static now() { return FIXED.getTime(); }
};
const cases = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
for (const c of cases) {
  delete c.expected;
  delete c.error;
  try {
    c.expected = new Template(c.template).render(c.context ?? {});
  } catch (e) {
    c.error = true;
  }
}
fs.writeFileSync(process.argv[3], JSON.stringify(cases, null, 1) + "\n");
const bad = cases.filter(c => c.error).map(c => c.name);
console.log(cases.length, "cases;", bad.length, "refused:", bad.join(", "));
