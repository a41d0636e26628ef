#!/usr/bin/env python3
"""render_jinja2_cases.py IN.json OUT.json (may be the same file)

Renders every case of IN.json ({name, template, context}) with Python's Jinja2 as transformers sets
it up (jinja2_env.py) and writes the cases with `expected` (the text) or `error` (Jinja2's message,
when it refuses the case) to OUT.json. The cases are the language's corners where Jinja2 is the
specification kiln follows and @huggingface/jinja (the reference of cases.json) differs or
refuses: undefined values as keys, operands, filter and test arguments, conditions; method names
on mappings; filter and test names Jinja2 checks only when they run.

  python3 render_jinja2_cases.py jinja2_cases.json jinja2_cases.json
"""
import json
import sys

from jinja2_env import environment


def main():
    in_path, out_path = sys.argv[1:]
    with open(in_path, encoding="utf-8") as fh:
        cases = json.load(fh)
    env = environment()
    for c in cases:
        c.pop("expected", None)
        c.pop("error", None)
        try:
            c["expected"] = env.from_string(c["template"]).render(**c.get("context", {}))
        except Exception as e:  # the reference refuses: the case says why
            c["error"] = f"{type(e).__name__}: {e}"
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(cases, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    refused = [c["name"] for c in cases if "error" in c]
    print(len(cases), "cases;", len(refused), "refused:", ", ".join(refused))


if __name__ == "__main__":
    main()
