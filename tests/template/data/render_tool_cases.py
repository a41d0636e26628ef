#!/usr/bin/env python3
"""render_tool_cases.py TEMPLATE_DIR... OUT.json

Renders every TEMPLATE_DIR/*.jinja that mentions tools with Python's Jinja2 as transformers sets it
up (jinja2_env.py), for tool definitions whose parameter schemas are the awkward kinds real clients
send: a property with only an `enum` (no "type"), `anyOf`, nested `items`, `$ref` into `$defs`,
and no `description` anywhere. Writes {"contexts": {SCENARIO: context}, "cases": [{template,
scenario, expected}]}; a case Jinja2 refuses has `error` (its message) instead of `expected`.
Templates are read in the order of the folders given; a name seen before is skipped.

  python3 render_tool_cases.py llama_cpp ../../chat/data/templates ../../data/templates tool_cases.json
"""
import json
import os
import sys

from jinja2_env import environment


def fn(name, parameters, description=None):
    f = {"name": name}
    if description is not None:
        f["description"] = description
    f["parameters"] = parameters
    return {"type": "function", "function": f}


# Tools whose parameter schemas use what the templates' type printers do not expect: a property with
# only an enum, anyOf, a list of types, nested items, $ref into $defs.
SCHEMA_TOOLS = [
    fn("get_weather", {"type": "object",
                       "properties": {"city": {"type": "string", "description": "City name"},
                                      "unit": {"enum": ["c", "f"]}},
                       "required": ["city"]}, "Current weather for a city"),
    fn("set_alarm", {"type": "object",
                     "properties": {"at": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                                    "repeat": {"type": ["string", "integer"]}},
                     "required": ["at"]}, "Set an alarm"),
    fn("plan_route", {"type": "object",
                      "properties": {"stops": {"type": "array",
                                               "items": {"type": "object",
                                                         "properties": {"name": {"type": "string"},
                                                                        "tags": {"type": "array",
                                                                                 "items": {"enum": ["a", "b"]}}}}},
                                     "origin": {"$ref": "#/$defs/place"}},
                      "$defs": {"place": {"type": "object", "properties": {"lat": {"type": "number"},
                                                                           "lon": {"type": "number"}}}}},
       "Plan a route through stops"),
]
# A tool without a description anywhere (templates that print descriptions may refuse it).
BARE_TOOL = fn("convert", {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "value": {"type": "number"}}})

CALL = {"id": "call00001", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}
ASK = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Weather in Paris?"}]

SCENARIOS = {
    "schemas+gen": {"messages": ASK, "tools": SCHEMA_TOOLS, "add_generation_prompt": True},
    "bare+gen": {"messages": ASK, "tools": [BARE_TOOL], "add_generation_prompt": True},
    "history": {"messages": ASK + [{"role": "assistant", "content": "", "tool_calls": [CALL]},
                                   {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
                                    "content": "{\"temp\": 21}"},
                                   {"role": "assistant", "content": "It is 21°C in Paris."}],
                "tools": SCHEMA_TOOLS, "add_generation_prompt": False},
}


def main():
    *dirs, out_path = sys.argv[1:]
    env = environment()
    contexts = {name: dict(scenario, bos_token="<s>", eos_token="</s>") for name, scenario in SCENARIOS.items()}
    seen, cases = set(), []
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".jinja") or f in seen:
                continue
            seen.add(f)
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                source = fh.read()
            if "tools" not in source:
                continue
            template = env.from_string(source)
            for name, context in contexts.items():
                case = {"template": f, "scenario": name}
                try:
                    case["expected"] = template.render(**context)
                except Exception as e:  # the reference refuses: the case says why
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump({"contexts": contexts, "cases": cases}, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    refused = [c for c in cases if "error" in c]
    print(len(cases), "cases;", len(refused), "refused")
    for c in refused:
        print(" ", c["template"], c["scenario"], c["error"][:100])


if __name__ == "__main__":
    main()
