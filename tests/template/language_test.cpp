// Unit tests of the template language: constructs the reference renderer (@huggingface/jinja)
// lacks, checked against Python Jinja2 3.1 semantics (the expected strings below are what
// Jinja2 renders, except where a comment says the reference renderer's spelling is kept),
// and errors: their messages name the construct and the line/column.
#include <gtest/gtest.h>

#include "template_test_util.h"
#include "text/jinja/json.h"
#include "text/jinja/template.h"

namespace kiln::jinja {
namespace {

Result<std::string> try_render(const std::string& source,
                               const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error();
  RenderOptions options;
  options.context = from_json(context).as_object();
  options.clock = fixture_clock;
  return t->render(options);
}

std::string render(const std::string& source,
                   const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  auto r = try_render(source, context);
  EXPECT_TRUE(r.ok()) << source << " -> " << r.error().message;
  return r.ok() ? *r : "<error>";
}

std::string error_of(const std::string& source,
                     const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  auto r = try_render(source, context);
  EXPECT_FALSE(r.ok()) << source << " rendered " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.error().message;
}

TEST(JinjaLanguage, RawBlock) {
  EXPECT_EQ(render("{% raw %}{{ not evaluated }} {% if %}{% endraw %}!"), "{{ not evaluated }} {% if %}!");
  EXPECT_EQ(render("a {%- raw -%}  x  {%- endraw -%}  b"), "axb");
}

TEST(JinjaLanguage, LoopCycleAndDepth) {
  EXPECT_EQ(render("{% for i in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "ababa");
  EXPECT_EQ(render("{% for i in [7] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}"), "10");
}

TEST(JinjaLanguage, TestsWithArguments) {
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}"), "true false");
  EXPECT_EQ(render("{{ 2 is in [1, 2] }} {{ 'x' is in 'abc' }}"), "true false");
  EXPECT_EQ(
      render(
          "{{ 1 is eq 1 }} {{ 1 is ne 1 }} {{ 2 is gt 1 }} {{ 2 is le 1 }} {{ 2 is lt 3 }} {{ 3 is ge 3 }}"),
      "true false true false true true");
  EXPECT_EQ(render("{{ 1.5 is float }} {{ 1 is float }} {{ 'upper' is filter }} {{ 'odd' is test }}"),
            "true false true true");
  EXPECT_EQ(render("{{ x is sameas x }} {{ [1] is sameas [1] }}", {{"x", {1}}}), "true false");
}

TEST(JinjaLanguage, FiltersBeyondReference) {
  EXPECT_EQ(render("{{ ['a', 'b'] | map('upper') | join }}"), "AB");
  EXPECT_EQ(render("{{ range(6) | select('odd') | list }} {{ range(6) | reject('odd') | list }}"),
            "[1, 3, 5] [0, 2, 4]");
  EXPECT_EQ(render("{{ [1, 2, 3] | count }} {{ x | d('dflt') }}"), "3 dflt");
  EXPECT_EQ(render("{{ range(5) | batch(2) | list }} {{ range(3) | batch(2, 'x') | list }}"),
            "[[0, 1], [2, 3], [4]] [[0, 1], [2, \"x\"]]");
  EXPECT_EQ(render("{{ 'one two  three' | wordcount }}"), "3");
  EXPECT_EQ(render("{{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }}"), "2.57 2.0 3.0");
  EXPECT_EQ(render("{{ [1, 2, 3] | sum }} {{ [{'n': 2}, {'n': 5}] | sum(attribute='n') }}"), "6 7");
  EXPECT_EQ(render("{{ [3, 1, 2] | min }} {{ ['b', 'C', 'a'] | max }}"), "1 C");
  EXPECT_EQ(render("{{ 'ff' | int(base=16) }} {{ '12' | int }} {{ ' 7 ' | int }} {{ 'x' | int(-1) }}"),
            "255 12 7 -1");
  EXPECT_EQ(render("{{ '<a href=\"x\">&\\'' | escape }}"), "&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
  EXPECT_EQ(render("{{ 'abc' | reverse }} {{ 'xxhixx' | trim('x') }}"), "cba hi");
  EXPECT_EQ(render("{{ '%s is %d' | format('x', 3) }}"), "x is 3");
  EXPECT_EQ(render("{{ {'a': 1} | attr('a') }}"), "1");
  EXPECT_EQ(render("{{ ['a', 'A', 'b'] | unique | list }} {{ ['a', 'A'] | unique(true) | list }}"),
            "[\"a\", \"b\"] [\"a\", \"A\"]");
}

TEST(JinjaLanguage, StringMethods) {
  EXPECT_EQ(render("{{ 'xxhixx'.strip('x') }}|{{ '--a--'.lstrip('-') }}|{{ '--a--'.rstrip('-') }}"),
            "hi|a--|--a");
  EXPECT_EQ(render("{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ "
                   "'banana'.count('an') }}"),
            "2 -1 2 2");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=5) "
                   "}} {{ '{{}}'.format() }}"),
            "1 and b ba 5! {}");
  EXPECT_EQ(render("{{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }}"),
            "a-b [\"a\", \"b\", \"c\"]");
  EXPECT_EQ(render("{{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ '  '.isspace() }}"), "true false true");
  EXPECT_EQ(render("{{ 'a b c'.split(none, 1) }} {{ 'a,,b'.split(',') }}"),
            "[\"a\", \"b c\"] [\"a\", \"\", \"b\"]");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b', 2) }}"), "bba");
}

TEST(JinjaLanguage, ListAndDictMethods) {
  EXPECT_EQ(render("{% set l = [1] %}{% set _ = l.append(2) %}{% set _ = l.insert(0, 0) %}"
                   "{% set _ = l.extend([3]) %}{{ l }} {{ l.index(2) }} {{ l.count(1) }} {{ l.pop() }} {{ "
                   "l.pop(0) }} {{ l }}"),
            "[0, 1, 2, 3] 2 1 3 0 [1, 2]");
  EXPECT_EQ(render("{% set d = {'a': 1} %}{% set _ = d.update({'b': 2}) %}{{ d }} {{ d.pop('a') }} {{ d }}"),
            "{\"a\": 1, \"b\": 2} 1 {\"b\": 2}");
  // Appending inside a loop is visible outside it: arrays are shared, as Python lists are.
  EXPECT_EQ(
      render("{% set acc = [] %}{% for i in range(3) %}{% set _ = acc.append(i * i) %}{% endfor %}{{ acc }}"),
      "[0, 1, 4]");
}

TEST(JinjaLanguage, Globals) {
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }} {{ len([1, 2]) }} {{ len('héllo') }}"),
            "{\"a\": 1, \"b\": \"x\"} 2 5");
  EXPECT_EQ(render("{{ strftime_now('%A %a %j %I%p %y %-d/%-m %e %S %Z %%') }}"),
            "Thursday Thu 015 09AM 26 15/1 15 00 UTC %");
}

TEST(JinjaLanguage, PythonArithmetic) {
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ 'ab' * 2 }} {{ [0] * 3 }}"),
            "-4 2 -2 0.5 abab [0, 0, 0]");
  EXPECT_EQ(render("{{ 'b' < 'c' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }}"), "true true true");
  EXPECT_EQ(render("{% set t = 1, 2 %}{{ t }} {{ (1,) }} {{ () }}"), "[1, 2] [1] []");
}

TEST(JinjaLanguage, LengthCountsCodePoints) {
  // Python's len(); the reference renderer counts UTF-16 units (4 here).
  EXPECT_EQ(render("{{ s | length }} {{ s[-1] }}", {{"s", "é東🦙"}}), "3 🦙");
}

TEST(JinjaLanguage, UndefinedIsForgiving) {
  EXPECT_EQ(render("[{{ x.y.z }}][{{ x['a'] }}][{% for i in x %}{{ i }}{% endfor %}][{{ x | length }}]"),
            "[][][][0]");
  EXPECT_EQ(render("{{ x is defined and x.y }}|{{ none.attr is defined }}"), "false|false");
}

TEST(JinjaLanguage, RenderDoesNotChangeContextAndRepeats) {
  auto t = Template::parse("{% set _ = items.append(9) %}{{ items }}");
  ASSERT_TRUE(t.ok());
  RenderOptions options;
  options.context = from_json(nlohmann::ordered_json{{"items", {1}}}).as_object();
  auto a = t->render(options);
  auto b = t->render(options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, "[1, 9]");
  EXPECT_EQ(*b, "[1, 9]");
  EXPECT_EQ(options.context.find("items")->as_array().size(), 1u);
}

TEST(JinjaErrors, ParseErrorsNameConstructAndPlace) {
  EXPECT_EQ(error_of("line one\n{{ x | nosuchfilter }}"),
            "jinja: line 2, column 8: unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{{ x is nosuchtest }}"), "jinja: line 1, column 9: unknown test 'nosuchtest'");
  EXPECT_EQ(error_of("\n\n  {% include 'x.j2' %}"),
            "jinja: line 3, column 6: unsupported statement 'include'");
  EXPECT_EQ(error_of("{% if true %}never closed"),
            "jinja: line 1, column 4: unclosed 'if' (expected '{% endif %}' before the end of the template)");
  EXPECT_EQ(error_of("abc {{ x "), "jinja: line 1, column 5: unclosed '{{' (no matching '}}')");
  EXPECT_EQ(error_of("{{ 'abc }}"), "jinja: line 1, column 4: unterminated string literal");
  EXPECT_EQ(error_of("{% break %}"), "jinja: line 1, column 4: 'break' outside a for loop");
  EXPECT_EQ(error_of("{% endfor %}"),
            "jinja: line 1, column 4: unexpected 'endfor' (no open block it could close)");
  EXPECT_EQ(error_of("{{ '\\q' }}"), "jinja: line 1, column 5: unknown escape '\\q' in a string literal");
  EXPECT_EQ(error_of("{{ 1 + }}"), "jinja: line 1, column 8: unexpected '}}' in an expression");
  EXPECT_EQ(error_of("{# never closed"), "jinja: line 1, column 1: unclosed comment (no matching '#}')");
  EXPECT_EQ(error_of("{{ f(*args) }}"), "jinja: line 1, column 6: unsupported: argument unpacking ('*')");
  EXPECT_EQ(error_of("{% for x in y recursive %}{% endfor %}"),
            "jinja: line 1, column 15: unsupported: recursive for loops");
  EXPECT_EQ(error_of("{{ x @ y }}"), "jinja: line 1, column 6: unexpected character '@' in a tag");
}

TEST(JinjaErrors, RuntimeErrorsNameConstructAndPlace) {
  EXPECT_EQ(error_of("{% if messages[0].role != 'user' %}\n  {{ raise_exception('Conversation must start "
                     "with user') }}\n{% endif %}",
                     {{"messages", {{{"role", "system"}}}}}),
            "jinja: line 2, column 6: raise_exception: Conversation must start with user");
  EXPECT_EQ(error_of("{{ nosuch(1) }}"),
            "jinja: line 1, column 4: 'nosuch' is undefined and cannot be called");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "jinja: line 1, column 6: division by zero ('//')");
  EXPECT_EQ(error_of("{{ 'a' - 1 }}"),
            "jinja: line 1, column 8: unsupported operand types for '-': string and integer");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"),
            "jinja: line 1, column 19: cannot set attribute 'y' of 'x': it is integer, not a namespace");
  EXPECT_EQ(error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
            "jinja: line 1, column 4: cannot unpack 3 values into 2 names");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "jinja: line 1, column 34: macro 'm' takes at most 1 argument(s), got 2");
  EXPECT_EQ(error_of("{{ range(1, 2, 0) }}"), "jinja: line 1, column 4: range: step must not be zero");
}

TEST(JinjaErrors, RunawayInputEndsInErrors) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested deeper than"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000) | length }}").find("range: more than"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}")
                .find("template nested deeper than 256 levels"),
            std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 300; ++i) deep_ifs += "{% if true %}";
  EXPECT_NE(error_of(deep_ifs).find("template nested deeper than 256 levels"), std::string::npos);
  EXPECT_NE(
      error_of("{% set ns = namespace(x=[]) %}{% for i in range(600) %}{% set ns.x = [ns.x] %}{% endfor %}"
               "{{ ns.x | tojson }}")
          .find("tojson: value nested deeper than 512 levels"),
      std::string::npos);
  // Malformed UTF-8 in the data is replaced, never read past.
  EXPECT_EQ(render("{{ s | length }}", {{"s", std::string("a\xE6\x9D")}}), "3");
}

}  // namespace
}  // namespace kiln::jinja
