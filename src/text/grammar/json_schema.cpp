// JSON schema to GBNF (see json_schema.h). The traversal classifies each schema as llama.cpp's
// common_chat_schema_builder does (build_node: $ref, then anyOf/oneOf, a type list, const,
// enum, then the type or, without one, the structural keywords), refuses keywords whose meaning
// the grammar would not enforce, and emits the rules of llama.cpp's converter in its order (which
// decides the names of colliding rules).
#include "text/grammar/json_schema.h"

#include <climits>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "text/grammar/regex_to_gbnf.h"
#include "text/grammar/schema_rules.h"
#include "text/unicode.h"

namespace kiln::grammar {
namespace {

using json = nlohmann::ordered_json;

struct SchemaError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(const std::string& path, std::string message) { throw SchemaError{path, std::move(message)}; }

// Characters outside [a-zA-Z0-9-] (runs of them) become one '-', as llama.cpp's rule names.
std::string rule_name_of(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
      in_run = false;
    } else if (!in_run) {
      out += '-';
      in_run = true;
    }
  }
  return out;
}

enum class Kind { Any, Ref, AnyOf, AllOf, Const, Enum, Null, Boolean, Number, Integer, String, Array, Tuple, Object };

const std::set<std::string, std::less<>> kAnnotations = {"title",   "description", "$schema",  "default",   "examples",
                                                         "$id",     "$comment",    "readOnly", "writeOnly", "deprecated",
                                                         "$defs",   "definitions"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength", "pattern", "contentEncoding",
                                                            "contentMediaType", "contentSchema"};
const std::set<std::string, std::less<>> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                            "multipleOf"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items",       "prefixItems", "minItems",        "maxItems",
                                                           "uniqueItems", "contains",    "minContains",     "maxContains",
                                                           "additionalItems", "unevaluatedItems"};
const std::set<std::string, std::less<>> kObjectKeywords = {
    "properties",    "required",      "additionalProperties", "minProperties",   "maxProperties",
    "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
    "dependencies"};

// The keywords each kind enforces (besides annotations).
const std::set<std::string, std::less<>>& handled(Kind kind) {
  static const std::map<Kind, std::set<std::string, std::less<>>> table = {
      {Kind::Any, {}},
      {Kind::Ref, {"$ref"}},
      {Kind::AnyOf, {"anyOf", "oneOf"}},
      {Kind::AllOf, {"allOf", "type"}},
      {Kind::Const, {"const", "type"}},
      {Kind::Enum, {"enum", "type"}},
      {Kind::Null, {"type"}},
      {Kind::Boolean, {"type"}},
      {Kind::Number, {"type"}},
      {Kind::Integer, {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
      {Kind::String, {"type", "pattern", "format", "minLength", "maxLength"}},
      {Kind::Array, {"type", "items", "minItems", "maxItems"}},
      {Kind::Tuple, {"type", "items", "prefixItems", "minItems", "maxItems"}},
      {Kind::Object, {"type", "properties", "required", "additionalProperties"}},
  };
  return table.at(kind);
}

// Whether `key` constrains only values of a JSON type that a schema of `kind` never produces.
bool applies_to_other_types(Kind kind, std::string_view key) {
  const bool string_kw = kStringKeywords.count(key) > 0, number_kw = kNumberKeywords.count(key) > 0;
  const bool array_kw = kArrayKeywords.count(key) > 0, object_kw = kObjectKeywords.count(key) > 0;
  switch (kind) {
    case Kind::Null:
    case Kind::Boolean: return string_kw || number_kw || array_kw || object_kw;
    case Kind::Number:
    case Kind::Integer: return string_kw || array_kw || object_kw;
    case Kind::String: return number_kw || array_kw || object_kw;
    case Kind::Array:
    case Kind::Tuple: return string_kw || number_kw || object_kw;
    case Kind::Object:
    case Kind::AllOf: return string_kw || number_kw || array_kw;
    default: return false;  // the value may be of any type: every type's keywords apply
  }
}

// The schema's JSON types ("integer" included in "number"), for checking enum and const values.
bool value_has_type(const json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  return false;
}

bool has(const json& schema, std::string_view key) { return schema.contains(key); }

std::string json_pointer_unescape(std::string s) {
  for (size_t i = 0; (i = s.find('~', i)) != std::string::npos; ++i) {
    if (i + 1 < s.size() && s[i + 1] == '1') s.replace(i, 2, "/");
    else if (i + 1 < s.size() && s[i + 1] == '0') s.replace(i, 2, "~");
  }
  return s;
}

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

struct SchemaConverter::Visit {
  SchemaConverter& c;
  const json* root;                   // the document "#" names where the traversal is
  std::set<const json*> embedded;     // SchemaDocuments::embedded
  int depth = 0;  // visits in progress: the traversal's recursion depth

  // Holds one level of depth for a visit, and the document of an embedded one; past
  // kMaxSchemaDepth the schema is refused (a $ref chain can nest without bound in a small
  // document).
  struct Level {
    Level(Visit& v, const json& schema, const std::string& path) : v_(v), root_(v.root) {
      if (++v_.depth > kMaxSchemaDepth) {
        --v_.depth;
        fail(path, "schemas nest deeper than " + std::to_string(kMaxSchemaDepth) +
                       " levels (counting properties, items, anyOf/oneOf alternatives and $refs)");
      }
      if (v_.embedded.count(&schema)) v_.root = &schema;
    }
    ~Level() {
      --v_.depth;
      v_.root = root_;
    }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;

   private:
    Visit& v_;
    const json* root_;
  };

  Kind classify(const json& schema, const std::string& path) {
    if (!schema.is_object()) fail(path, "a schema must be an object");
    if (has(schema, "$ref")) return Kind::Ref;
    if (has(schema, "oneOf") || has(schema, "anyOf")) return Kind::AnyOf;
    if (has(schema, "type") && schema["type"].is_array()) return Kind::AnyOf;
    if (has(schema, "const")) return Kind::Const;
    if (has(schema, "enum")) return Kind::Enum;
    const json* type = has(schema, "type") ? &schema["type"] : nullptr;
    if (type != nullptr && !type->is_string()) fail(path, "type must be a string or an array of strings");
    const std::string t = type != nullptr ? type->get<std::string>() : "";
    const bool has_properties =
        has(schema, "properties") || (has(schema, "additionalProperties") && schema["additionalProperties"] != true);
    const bool has_items = has(schema, "items") || has(schema, "prefixItems");
    auto array_kind = [&] {
      const json& items = has(schema, "items") ? schema["items"] : schema["prefixItems"];
      return has_items && items.is_array() ? Kind::Tuple : Kind::Array;
    };
    if (t.empty()) {
      if (has_properties) return Kind::Object;
      if (has(schema, "allOf")) return Kind::AllOf;
      if (has_items) return array_kind();
      if (has(schema, "pattern") || has(schema, "minLength") || has(schema, "maxLength") || has(schema, "format"))
        return Kind::String;
      return Kind::Any;
    }
    if (t == "object") return !has_properties && has(schema, "allOf") ? Kind::AllOf : Kind::Object;
    if (t == "string") return has(schema, "allOf") ? Kind::AllOf : Kind::String;
    if (t == "array") return array_kind();
    if (t == "integer") return Kind::Integer;
    if (t == "number") return Kind::Number;
    if (t == "boolean") return Kind::Boolean;
    if (t == "null") return Kind::Null;
    fail(path, "unknown type '" + t + "'");
  }

  // Refuses the keywords a schema of `kind` would not enforce.
  void check_keywords(const json& schema, Kind kind, const std::string& path) {
    const auto& ok = handled(kind);
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.count(key) || ok.count(key) || applies_to_other_types(kind, key)) continue;
      if (kind == Kind::Ref || kind == Kind::AnyOf)
        fail(path, "keyword '" + key + "' next to '" + (kind == Kind::Ref ? "$ref" : has(schema, "oneOf") ? "oneOf" : "anyOf") +
                       "' is not supported");
      fail(path, "keyword '" + key + "' is not supported");
    }
  }

  int count(const json& schema, const char* key, const std::string& path, int def) {
    if (!has(schema, key)) return def;
    const json& v = schema[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT_MAX)
      fail(path, std::string(key) + " must be a non-negative integer");
    return static_cast<int>(v.get<int64_t>());
  }

  // A bound rounded inwards to the integers it admits (llama.cpp's get_bound), or nullopt when it
  // excludes no integer: one past -1e18 for a lower bound (a minimum of -9223372036854775808, a
  // valid int64, is no minimum), past 1e18 for an upper one. A bound past 1e18 the other way
  // admits no integer the grammar writes and is refused.
  std::optional<int64_t> bound(const json& schema, const char* key, const std::string& path, bool lower,
                               bool exclusive) {
    const json& v = schema[key];
    if (!v.is_number()) fail(path, std::string(key) + " must be a number");
    constexpr double kLimit = 1e18;
    const double d = v.get<double>();
    if (lower ? d < -kLimit : d > kLimit) return std::nullopt;
    if (!std::isfinite(d) || std::fabs(d) > kLimit) fail(path, std::string(key) + " is too large");
    const bool round_up = lower != exclusive;
    const int64_t b = v.is_number_integer() ? v.get<int64_t>()
                                            : static_cast<int64_t>(round_up ? std::ceil(d) : std::floor(d));
    return exclusive ? (lower ? b + 1 : b - 1) : b;
  }

  // The schema a reference names in the current document: "#" (the document) or "#/" and a JSON
  // pointer into it.
  const json& target_of(const std::string& ref, const std::string& path) {
    if (ref != "#" && ref.compare(0, 2, "#/") != 0)
      fail(path, "$ref '" + ref + "': only references into the same document (#/...) are supported");
    const json* target = root;
    for (size_t begin = 2; begin <= ref.size();) {
      size_t end = ref.find('/', begin);
      if (end == std::string::npos) end = ref.size();
      const std::string sel = json_pointer_unescape(ref.substr(begin, end - begin));
      if (target->is_object() && target->contains(sel)) {
        target = &(*target)[sel];
      } else if (target->is_array() && !sel.empty() && sel.find_first_not_of("0123456789") == std::string::npos &&
                 sel.size() < 10 && std::stoul(sel) < target->size()) {
        target = &(*target)[std::stoul(sel)];
      } else {
        fail(path, "$ref '" + ref + "': '" + sel + "' not found");
      }
      begin = end + 1;
    }
    return *target;
  }

  // The rule of a reference, made once per document and reference: one met again, or inside its
  // own schema, gets the same rule. Its schema is visited under the name "ref" and the pointer
  // (numbered when another rule or reference has that name), and the rule is the one the visit
  // gives (a primitive's own, for a reference to a primitive type), as llama.cpp's _resolve_ref.
  std::string resolve_ref(const std::string& ref, const std::string& path) {
    const json& target = target_of(ref, path);
    const RefOrigin origin{root, ref};
    if (auto it = c.ref_rules_.find(origin); it != c.ref_rules_.end()) return it->second;
    const std::string base = "ref" + rule_name_of(ref.substr(1));
    std::string ref_name = base;
    for (int i = 0; c.rules_.count(ref_name) || c.ref_names_.count(ref_name); ++i) ref_name = base + std::to_string(i);
    c.ref_names_.insert(ref_name);
    c.ref_rules_[origin] = ref_name;  // before the visit: a reference inside it finds the rule
    const std::string made = visit(target, ref_name, ref);
    c.ref_rules_[origin] = made;
    return made;
  }

  std::string primitive(const std::string& rule_name, const std::string& type) {
    return c.add_primitive(rule_name == "root" ? "root" : type, type);
  }

  // ref: llama.cpp _build_object_rule
  std::string object_rule(const std::vector<std::pair<std::string, std::pair<const json*, std::string>>>& properties,
                          const std::set<std::string>& required, const std::string& name, const json* additional,
                          const std::string& path) {
    std::vector<std::string> required_props, optional_props, prop_names;
    std::map<std::string, std::string> kv_rules;
    const std::string prefix = name + (name.empty() ? "" : "-");
    for (const auto& [prop, schema_and_path] : properties) {
      const std::string prop_rule = visit(*schema_and_path.first, prefix + prop, schema_and_path.second);
      kv_rules[prop] = c.add_rule(prefix + prop + "-kv", gbnf_literal(json(prop).dump()) + " space \":\" space " + prop_rule);
      (required.count(prop) ? required_props : optional_props).push_back(prop);
      prop_names.push_back(prop);
    }
    if (additional != nullptr) {
      const std::string sub = prefix + "additional";
      const std::string value_rule = additional->is_boolean() ? c.add_primitive("value", "value")
                                                              : visit(*additional, sub + "-value", path + "/additionalProperties");
      const std::string key_rule =
          prop_names.empty() ? c.add_primitive("string", "string") : c.add_rule(sub + "-k", c.not_strings(prop_names));
      kv_rules["*"] = c.add_rule(sub + "-kv", key_rule + " \":\" space " + value_rule);
      optional_props.push_back("*");
    }
    if (required_props.empty() && optional_props.empty()) return "\"{\" space \"}\"";
    std::string rule = "\"{\" space ";
    for (size_t i = 0; i < required_props.size(); ++i) {
      if (i > 0) rule += " \",\" space ";
      rule += kv_rules[required_props[i]];
    }
    if (!optional_props.empty()) {
      rule += " (";
      if (!required_props.empty()) rule += " \",\" space ( ";
      // Optional property i, first in the object or after a comma.
      auto item = [&](size_t i, bool after_comma) {
        const std::string& k = optional_props[i];
        const std::string& kv = kv_rules[k];
        const std::string comma_ref = "( \",\" space " + kv + " )";
        return after_comma ? comma_ref + (k == "*" ? "*" : "?") : kv + (k == "*" ? " " + comma_ref + "*" : "");
      };
      // rest[i]: " " and the rule for the optional properties after i ("" after the last), named
      // after property i (llama.cpp's recursive get_recursive_refs, built from the last property
      // back: the order llama.cpp adds these rules in, and no recursion per property).
      const size_t n = optional_props.size();
      std::vector<std::string> rest(n);
      for (size_t i = n - 1; i-- > 0;)
        rest[i] = " " + c.add_rule(prefix + optional_props[i] + "-rest", item(i + 1, true) + rest[i + 1]);
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) rule += " | ";
        rule += item(i, false) + rest[i];
      }
      if (!required_props.empty()) rule += " )";
      rule += " )?";
    }
    return rule + " space \"}\"";
  }

  // The component of an allOf, through $refs.
  const json& deref(const json& schema, const std::string& path) {
    const json* s = &schema;
    for (int hops = 0; s->is_object() && has(*s, "$ref"); ++hops) {
      if (hops > 64) fail(path, "$ref chain too long");
      s = &target_of((*s)["$ref"].is_string() ? (*s)["$ref"].get<std::string>() : "", path);
    }
    return *s;
  }

  // ref: llama.cpp _visit_all_of: objects merge their properties (those of an anyOf inside become
  // optional), enums intersect.
  std::string all_of(const json& schema, const std::string& name, const std::string& rule_name, const std::string& path) {
    const json& parts = schema["allOf"];
    if (!parts.is_array() || parts.empty()) fail(path + "/allOf", "allOf must be a non-empty array of schemas");
    std::set<std::string> required;
    std::vector<std::pair<std::string, std::pair<const json*, std::string>>> properties;
    std::map<std::string, size_t> enum_values;
    size_t n_objects = 0, n_enums = 0;
    bool closed = false;
    std::function<void(const json&, bool, const std::string&)> add = [&](const json& comp, bool is_required,
                                                                          const std::string& p) {
      const json& s = deref(comp, p);
      const Kind k = classify(s, p);
      if (k == Kind::Object) {
        check_keywords(s, k, p);
        ++n_objects;
        if (has(s, "additionalProperties") && s["additionalProperties"] == false) closed = true;
        if (has(s, "properties")) {
          if (!s["properties"].is_object()) fail(p, "properties must be an object");
          for (const auto& [prop, ps] : s["properties"].items()) {
            for (const auto& existing : properties) {
              if (existing.first == prop) fail(p, "allOf: property '" + prop + "' is defined by two parts");
            }
            properties.push_back({prop, {&ps, p + "/properties/" + prop}});
            if (is_required) required.insert(prop);
          }
        }
        if (!is_required && has(s, "required") && !s["required"].empty())
          fail(p, "allOf: an anyOf part with required properties is not supported");
      } else if (k == Kind::Enum) {
        check_keywords(s, k, p);
        ++n_enums;
        check_enum(s["enum"], p);
        for (const auto& v : s["enum"]) enum_values[gbnf_literal(v.dump())] += 1;
      } else {
        fail(p, "allOf: only objects (their properties are merged) or enums (intersected) can be combined");
      }
    };
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string p = path + "/allOf/" + std::to_string(i);
      const json& part = deref(parts[i], p);
      if (part.is_object() && (has(part, "anyOf") || has(part, "oneOf"))) {
        const json& alts = has(part, "oneOf") ? part["oneOf"] : part["anyOf"];
        if (!alts.is_array()) fail(p, "anyOf must be an array of schemas");
        for (size_t j = 0; j < alts.size(); ++j) add(alts[j], false, p + "/anyOf/" + std::to_string(j));
      } else {
        add(part, true, p);
      }
    }
    if (n_enums > 0 && n_objects > 0) fail(path, "allOf: objects and enums cannot be combined");
    if (closed && n_objects > 1) fail(path, "allOf: additionalProperties false in a part is not supported");
    if (n_enums > 0) {
      std::string alternatives;
      for (const auto& [literal, n] : enum_values) {
        if (n != parts.size()) continue;
        alternatives += (alternatives.empty() ? "" : " | ") + literal;
      }
      if (alternatives.empty()) fail(path, "allOf: the enums have no value in common");
      return c.add_rule(rule_name, "(" + alternatives + ")");
    }
    return c.add_rule(rule_name, object_rule(properties, required, name, nullptr, path));
  }

  std::string visit(const json& schema, const std::string& name, const std::string& path,
                    bool check_value_types = true) {
    const Level level(*this, schema, path);
    const std::string rule_name = schema_rules::is_reserved_name(name) ? name + "-" : name.empty() ? "root" : name;
    const std::string sub_name = name + (name.empty() ? "" : "-");
    const Kind kind = classify(schema, path);
    if (!(kind == Kind::AnyOf && has(schema, "type") && schema["type"].is_array())) check_keywords(schema, kind, path);
    switch (kind) {
      case Kind::Ref: {
        if (!schema["$ref"].is_string()) fail(path, "$ref must be a string");
        return c.add_rule(rule_name, resolve_ref(schema["$ref"].get<std::string>(), path));
      }
      case Kind::AnyOf: {
        std::vector<std::string> alternatives;
        if (has(schema, "oneOf") || has(schema, "anyOf")) {
          if (has(schema, "oneOf") && has(schema, "anyOf")) fail(path, "oneOf and anyOf together are not supported");
          const char* key = has(schema, "oneOf") ? "oneOf" : "anyOf";
          const json& alts = schema[key];
          if (!alts.is_array() || alts.empty()) fail(path + "/" + key, std::string(key) + " must be a non-empty array of schemas");
          for (size_t i = 0; i < alts.size(); ++i)
            alternatives.push_back(visit(alts[i], name + (name.empty() ? "alternative-" : "-") + std::to_string(i),
                                         path + "/" + key + "/" + std::to_string(i)));
        } else {
          // {"type": [A, B], ...} is {"anyOf": [{"type": A, ...}, {"type": B, ...}]}.
          const json& types = schema["type"];
          if (types.empty()) fail(path, "type must not be empty");
          check_enum_types(schema, types, path);
          for (size_t i = 0; i < types.size(); ++i) {
            if (!types[i].is_string()) fail(path, "type must be a string or an array of strings");
            json alt = schema;
            alt["type"] = types[i];
            alternatives.push_back(visit(alt, name + (name.empty() ? "alternative-" : "-") + std::to_string(i),
                                         path + "/type/" + std::to_string(i), false));
          }
        }
        std::string rule;
        for (size_t i = 0; i < alternatives.size(); ++i) rule += (i ? " | " : "") + alternatives[i];
        return c.add_rule(rule_name, rule);
      }
      case Kind::AllOf: return all_of(schema, name, rule_name, path);
      case Kind::Const:
        if (has(schema, "enum")) fail(path, "keyword 'enum' next to 'const' is not supported");
        if (check_value_types && has(schema, "type")) check_enum_types(schema, json::array({schema["type"]}), path);
        return c.add_rule(rule_name, gbnf_literal(schema["const"].dump()));
      case Kind::Enum: {
        const json& values = schema["enum"];
        check_enum(values, path);
        if (check_value_types && has(schema, "type")) check_enum_types(schema, json::array({schema["type"]}), path);
        std::string rule = "(";
        for (size_t i = 0; i < values.size(); ++i) rule += (i ? " | " : "") + gbnf_literal(values[i].dump());
        return c.add_rule(rule_name, rule + ")");
      }
      case Kind::Object: {
        std::set<std::string> required;
        std::vector<std::pair<std::string, std::pair<const json*, std::string>>> properties;
        if (has(schema, "required")) {
          if (!schema["required"].is_array()) fail(path, "required must be an array of property names");
          for (const auto& r : schema["required"]) {
            if (!r.is_string()) fail(path, "required must be an array of property names");
            required.insert(r.get<std::string>());
          }
        }
        if (has(schema, "properties")) {
          if (!schema["properties"].is_object()) fail(path, "properties must be an object");
          for (const auto& [prop, ps] : schema["properties"].items()) properties.push_back({prop, {&ps, path + "/properties/" + prop}});
        }
        for (const std::string& r : required) {
          bool found = false;
          for (const auto& p : properties) found = found || p.first == r;
          if (!found) fail(path, "required property '" + r + "' has no schema in properties");
        }
        const json* additional = nullptr;
        static const json kAny = true;
        if (has(schema, "additionalProperties")) {
          const json& a = schema["additionalProperties"];
          if (a.is_boolean()) {
            if (a.get<bool>()) additional = &kAny;
          } else if (a.is_object()) {
            // An empty schema accepts anything: the same as true.
            additional = a.empty() || classify(a, path + "/additionalProperties") == Kind::Any ? &kAny : &a;
            if (additional == &kAny) check_keywords(a, Kind::Any, path + "/additionalProperties");
          } else {
            fail(path, "additionalProperties must be a boolean or a schema");
          }
        } else if (!has(schema, "properties")) {
          additional = &kAny;  // {"type": "object"} alone accepts any object
        }
        if (properties.empty() && additional == &kAny) return c.add_rule(rule_name, c.add_primitive("object", "object"));
        return c.add_rule(rule_name, object_rule(properties, required, name, additional, path));
      }
      case Kind::Tuple: {
        const char* key = has(schema, "items") ? "items" : "prefixItems";
        if (has(schema, "items") && has(schema, "prefixItems")) fail(path, "items and prefixItems together are not supported");
        const json& items = schema[key];
        const int n = static_cast<int>(items.size());
        if (count(schema, "minItems", path, 0) > n || count(schema, "maxItems", path, n) < n)
          fail(path, "minItems / maxItems disagree with the " + std::to_string(n) + " items of the tuple");
        std::string rule = "\"[\" space ";
        for (int i = 0; i < n; ++i) {
          if (i > 0) rule += " \",\" space ";
          rule += visit(items[static_cast<size_t>(i)], sub_name + "tuple-" + std::to_string(i),
                        path + "/" + key + "/" + std::to_string(i));
        }
        return c.add_rule(rule_name, rule + " space \"]\"");
      }
      case Kind::Array: {
        if (has(schema, "prefixItems")) fail(path, "items and prefixItems together are not supported");
        const int min_items = count(schema, "minItems", path, 0);
        const int max_items = count(schema, "maxItems", path, -1);
        if (max_items >= 0 && max_items < min_items) fail(path, "maxItems is below minItems");
        static const json kAnyItems = json::object();
        const json& items = has(schema, "items") ? schema["items"] : kAnyItems;
        if (min_items == 0 && max_items < 0 && items.is_object() && classify(items, path + "/items") == Kind::Any) {
          check_keywords(items, Kind::Any, path + "/items");
          return primitive(rule_name, "array");
        }
        const std::string item = visit(items, sub_name + "item", path + "/items");
        return c.add_rule(rule_name, "\"[\" space " +
                                         schema_rules::repetition(item, min_items, max_items < 0 ? INT_MAX : max_items,
                                                                  "\",\" space") +
                                         " space \"]\"");
      }
      case Kind::String: {
        const bool has_length = has(schema, "minLength") || has(schema, "maxLength");
        if (has(schema, "pattern")) {
          if (has(schema, "format") || has_length) fail(path, "pattern together with format or lengths is not supported");
          if (!schema["pattern"].is_string()) fail(path, "pattern must be a string");
          auto rule = pattern_to_gbnf(c, schema["pattern"].get<std::string>(), rule_name, c.dotall_);
          if (!rule.ok()) fail(path, rule.error().message);
          return *rule;
        }
        if (has(schema, "format")) {
          if (has_length) fail(path, "format together with lengths is not supported");
          if (!schema["format"].is_string()) fail(path, "format must be a string");
          const std::string format = schema["format"].get<std::string>();
          if (format == "uuid" || (format.size() == 5 && format.compare(0, 4, "uuid") == 0 && format[4] >= '1' && format[4] <= '5'))
            return primitive(rule_name, "uuid");
          if (format != "date" && format != "time" && format != "date-time")
            fail(path, "format '" + format + "' is not supported (date, time, date-time, uuid are)");
          return c.add_rule(rule_name, c.add_primitive(format + "-string", format + "-string"));
        }
        if (has_length) {
          const int min_len = count(schema, "minLength", path, 0);
          const int max_len = count(schema, "maxLength", path, -1);
          if (max_len >= 0 && max_len < min_len) fail(path, "maxLength is below minLength");
          if (min_len > 0 || max_len >= 0) {
            const std::string ch = c.add_primitive("char", "char");
            return c.add_rule(rule_name, "\"\\\"\" " + schema_rules::repetition(ch, min_len, max_len < 0 ? INT_MAX : max_len) +
                                             " \"\\\"\"");
          }
        }
        return primitive(rule_name, "string");
      }
      case Kind::Integer: {
        int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
        if (has(schema, "minimum") && has(schema, "exclusiveMinimum")) fail(path, "minimum and exclusiveMinimum together are not supported");
        if (has(schema, "maximum") && has(schema, "exclusiveMaximum")) fail(path, "maximum and exclusiveMaximum together are not supported");
        if (has(schema, "minimum")) lo = bound(schema, "minimum", path, true, false).value_or(lo);
        if (has(schema, "exclusiveMinimum")) lo = bound(schema, "exclusiveMinimum", path, true, true).value_or(lo);
        if (has(schema, "maximum")) hi = bound(schema, "maximum", path, false, false).value_or(hi);
        if (has(schema, "exclusiveMaximum")) hi = bound(schema, "exclusiveMaximum", path, false, true).value_or(hi);
        if (lo == std::numeric_limits<int64_t>::min() && hi == std::numeric_limits<int64_t>::max())
          return primitive(rule_name, "integer");
        if (lo != std::numeric_limits<int64_t>::min() && hi != std::numeric_limits<int64_t>::max() && lo > hi)
          fail(path, "no integer lies between the bounds");
        return c.add_rule(rule_name, "(" + schema_rules::integer_range(lo, hi) + ")");
      }
      case Kind::Number: return primitive(rule_name, "number");
      case Kind::Boolean: return primitive(rule_name, "boolean");
      case Kind::Null: return primitive(rule_name, "null");
      case Kind::Any: return c.add_rule(rule_name, c.add_primitive("value", "value"));
    }
    return "";
  }

  // An enum's values: a non-empty array of at most kMaxEnumValues (each value is an alternative
  // that grammar work per token goes through: 16,000 cost 2 s a token on a small vocabulary).
  void check_enum(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) fail(path, "enum must be a non-empty array");
    if (values.size() > kMaxEnumValues)
      fail(path, "enum has " + std::to_string(values.size()) + " values, more than the " +
                     std::to_string(kMaxEnumValues) + " kiln takes");
  }

  // Every enum / const value must have one of `types`.
  void check_enum_types(const json& schema, const json& types, const std::string& path) {
    if (!has(schema, "enum") && !has(schema, "const")) return;
    std::vector<json> values;
    if (has(schema, "const")) values.push_back(schema["const"]);
    if (has(schema, "enum") && schema["enum"].is_array()) {
      for (const auto& v : schema["enum"]) values.push_back(v);
    }
    for (const json& v : values) {
      bool ok = false;
      for (const auto& t : types) ok = ok || (t.is_string() && value_has_type(v, t.get<std::string>()));
      if (!ok) fail(path, "value " + v.dump() + " does not have the schema's type " + (types.size() == 1 ? types[0].dump() : types.dump()));
    }
  }
};

SchemaConverter::SchemaConverter(bool dotall) : dotall_(dotall) {
  rules_["space"] = std::string(schema_rules::kSpaceRule);
}

std::string SchemaConverter::add_rule(const std::string& name, const std::string& rule) {
  const std::string esc = rule_name_of(name);
  auto it = rules_.find(esc);
  if (it == rules_.end() || it->second == rule) {
    rules_[esc] = rule;
    return esc;
  }
  int i = 0;
  while (true) {
    auto jt = rules_.find(esc + std::to_string(i));
    if (jt == rules_.end() || jt->second == rule) break;
    ++i;
  }
  const std::string key = esc + std::to_string(i);
  rules_[key] = rule;
  return key;
}

std::string SchemaConverter::add_primitive(const std::string& name, const std::string& key) {
  const schema_rules::Primitive* p = schema_rules::primitive(key);
  KILN_ASSERT(p != nullptr, "json schema: unknown primitive rule");
  const std::string n = add_rule(name, std::string(p->rule));
  for (std::string_view dep : p->deps) {
    if (!rules_.count(std::string(dep))) add_primitive(std::string(dep), std::string(dep));
  }
  return n;
}

// A JSON string that is none of `strings` (ref: llama.cpp _not_strings): a trie of the strings,
// each branch either leaving the trie (any other character, then anything) or going on.
std::string SchemaConverter::not_strings(const std::vector<std::string>& strings) {
  struct Node {
    std::map<uint32_t, size_t> children;
    bool end = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& s : strings) {
    size_t n = 0;
    for (uint32_t cp : text::decode_utf8(s)) {
      auto it = trie[n].children.find(cp);
      if (it == trie[n].children.end()) {
        trie.emplace_back();
        it = trie[n].children.emplace(cp, trie.size() - 1).first;
      }
      n = it->second;
    }
    trie[n].end = true;
  }
  const std::string ch = add_primitive("char", "char");
  // A character inside [...]: GBNF escapes for the ones that would end or change the class.
  auto class_char = [](uint32_t cp) {
    if (cp == '\\' || cp == ']' || cp == '-' || cp == '^' || cp == '"' || cp < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", cp);
      return std::string(buf);
    }
    return text::encode_utf8(cp);
  };
  std::string out = "[\"] ( ";
  // Depth first over the trie with an explicit stack (a string's length must not set the depth
  // of a recursion): each node writes its children as alternatives, a child with children of its
  // own in parentheses, then the alternative of any other character.
  struct Frame {
    size_t node;
    std::map<uint32_t, size_t>::const_iterator next;  // the next child to write
    std::string rejects;                              // the children's characters written so far
  };
  std::vector<Frame> stack{{0, trie[0].children.begin(), ""}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Node& node = trie[f.node];
    if (f.next == node.children.end()) {
      if (!node.children.empty()) out += " | [^\"" + f.rejects + "] " + ch + "*";
      stack.pop_back();
      if (!stack.empty()) out += ")";
      continue;
    }
    const auto [cp, child] = *f.next;
    const std::string cls = class_char(cp);
    out += f.next == node.children.begin() ? "[" : " | [";
    out += cls + "]";
    f.rejects += cls;
    ++f.next;
    if (trie[child].children.empty()) {
      out += " " + ch + "+";
    } else {
      out += " (";
      stack.push_back({child, trie[child].children.begin(), ""});
    }
  }
  out += " )";
  if (!trie[0].end) out += "?";
  return out + " [\"]";
}

Result<std::string> SchemaConverter::add_schema(const std::string& name, const nlohmann::ordered_json& schema,
                                                const SchemaDocuments& documents) {
  Visit v{*this, documents.root != nullptr ? documents.root : &schema,
          {documents.embedded.begin(), documents.embedded.end()}, 0};
  try {
    return v.visit(schema, name == "root" ? "" : name, "#");
  } catch (const SchemaError& e) {
    return make_error("json schema: ", e.message, " (at ", e.path, ")");
  } catch (const nlohmann::json::exception& e) {
    return make_error("json schema: ", e.what());
  }
}

std::string SchemaConverter::grammar() const {
  std::string out;
  for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
  return out;
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  SchemaConverter c;
  KILN_TRY(c.add_schema("", schema));
  return c.grammar();
}

}  // namespace kiln::grammar
