#!/usr/bin/env bash
# Regenerates schema_refs.json: llama.cpp's JSON-schema-to-GBNF conversion of every schema in
# schemas.json (and of convert_cases.json), the reference kiln's converter must reproduce
# character for character. Needs llama.cpp's source (node-llama-cpp 3.22.1 bundles it) with its
# ggml-base library built; nothing of llama.cpp is committed, only the outputs.
#   LLAMA=/work/peer/llama.cpp tests/grammar/data/make_schema_refs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
LLAMA=${LLAMA:-/work/peer/llama.cpp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The converter calls three string helpers of llama.cpp's common.cpp (which drags in all of
# libllama); this oracle defines them itself.
cat > "$tmp/oracle.cpp" <<'CPP'
#include <cstdio>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include "json-schema-to-grammar.h"
#include "json.h"
std::string string_join(const std::vector<std::string>& v, const std::string& sep) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? sep : "") + v[i];
  return r;
}
std::vector<std::string> string_split(const std::string& s, const std::string& d) {
  std::vector<std::string> parts;
  size_t start = 0, end;
  while ((end = s.find(d, start)) != std::string::npos) { parts.push_back(s.substr(start, end - start)); start = end + d.size(); }
  parts.push_back(s.substr(start));
  return parts;
}
std::string string_repeat(const std::string& s, size_t n) { std::string r; for (size_t i = 0; i < n; ++i) r += s; return r; }
// stdin: a JSON array of schemas; stdout: a JSON array of {"gbnf": ...} or {"error": ...}.
int main() {
  std::stringstream in;
  in << std::cin.rdbuf();
  auto schemas = nlohmann::ordered_json::parse(in.str());
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& s : schemas) {
    try {
      out.push_back({{"gbnf", json_schema_to_grammar(common_json::parse(s.dump()), true)}});
    } catch (const std::exception& e) {
      out.push_back({{"error", e.what()}});
    }
  }
  std::cout << out.dump(1) << "\n";
}
CPP
g++ -std=c++17 -O1 -I"$LLAMA/common" -I"$LLAMA/include" -I"$LLAMA/ggml/include" -I"$LLAMA/vendor" \
  "$tmp/oracle.cpp" "$LLAMA/common/json-schema-to-grammar.cpp" "$LLAMA/common/json-schema.cpp" \
  "$LLAMA/common/json.cpp" "$LLAMA/common/trie.cpp" "$LLAMA/common/unicode.cpp" \
  -L"$LLAMA/build/bin" -lggml-base -Wl,-rpath,"$LLAMA/build/bin" -o "$tmp/oracle"
python3 - "$here" "$tmp/oracle" <<'PY'
import json, subprocess, sys
here, oracle = sys.argv[1], sys.argv[2]
cases = json.load(open(f"{here}/schemas.json")) + json.load(open(f"{here}/convert_cases.json"))
res = subprocess.run([oracle], input=json.dumps([c["schema"] for c in cases]), capture_output=True, text=True, check=True)
outs = json.loads(res.stdout)
refs = [{"name": c["name"], **o} for c, o in zip(cases, outs)]
with open(f"{here}/schema_refs.json", "w") as f:
    json.dump(refs, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(len(refs), "references,", sum("error" in r for r in refs), "refused by llama.cpp")
PY
