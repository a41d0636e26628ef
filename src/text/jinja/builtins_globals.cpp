// Global functions: range, namespace, dict, len, raise_exception, strftime_now.
#include <ctime>

#include "text/jinja/builtins.h"
#include "text/jinja/builtins_common.h"

namespace kiln::jinja {

namespace {

// range() refuses to build more items than any template needs (a guard against runaway input).
constexpr int64_t kMaxRange = 1 << 20;

Value g_range(const CallArgs& args) {
  args.expect_at_most("range", 3, {});
  for (const Value& v : args.positional) {
    if (!v.is_int()) fail("range: arguments must be integers, got ", v.type_name());
  }
  int64_t start = 0, stop = 0, step = 1;
  switch (args.positional.size()) {
    case 1:
      stop = args.positional[0].as_int();
      break;
    case 2:
      start = args.positional[0].as_int(), stop = args.positional[1].as_int();
      break;
    case 3:
      start = args.positional[0].as_int(), stop = args.positional[1].as_int(),
      step = args.positional[2].as_int();
      break;
    default:
      fail("range: expected 1 to 3 arguments, got 0");
  }
  if (step == 0) fail("range: step must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) fail("range: more than ", kMaxRange, " items");
    out.emplace_back(i);
  }
  return Value(std::move(out));
}

// namespace(...) and dict(...): an object from an optional mapping plus keyword arguments.
Value make_object(const CallArgs& args, bool is_namespace, std::string_view what) {
  if (args.positional.size() > 1)
    fail(what, ": expected at most 1 positional argument, got ", args.positional.size());
  Object o;
  o.is_namespace = is_namespace;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_object()) {
      for (const auto& [k, v] : src.as_object().entries) o.set(k, v);
    } else if (src.is_array()) {
      for (const Value& pair : src.as_array()) {
        if (!pair.is_array() || pair.as_array().size() != 2 || !pair.as_array()[0].is_string()) {
          fail(what, ": expected [key, value] pairs with string keys");
        }
        o.set(pair.as_array()[0].as_string(), pair.as_array()[1]);
      }
    } else {
      fail(what, ": expected an object or a list of pairs, got ", src.type_name());
    }
  }
  for (const auto& [k, v] : args.keyword) o.set(k, v);
  return Value(std::move(o));
}

constexpr const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                   "July",    "August",   "September", "October", "November", "December"};
constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                 "Thursday", "Friday", "Saturday"};

}  // namespace

std::string format_time(std::chrono::system_clock::time_point t, std::string_view format) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out.push_back(format[i]);
      continue;
    }
    size_t j = i + 1;
    const bool no_pad = format[j] == '-';
    if (no_pad && j + 1 < format.size()) ++j;
    auto num = [&](int v, int width) {
      std::string s = std::to_string(v);
      if (!no_pad && static_cast<int>(s.size()) < width)
        s.insert(0, static_cast<size_t>(width - static_cast<int>(s.size())), '0');
      out += s;
    };
    switch (format[j]) {
      case 'Y':
        out += std::to_string(tm.tm_year + 1900);
        break;
      case 'y':
        num((tm.tm_year + 1900) % 100, 2);
        break;
      case 'm':
        num(tm.tm_mon + 1, 2);
        break;
      case 'd':
        num(tm.tm_mday, 2);
        break;
      case 'e': {
        const std::string s = std::to_string(tm.tm_mday);
        out += (s.size() < 2 && !no_pad ? " " : "") + s;
        break;
      }
      case 'H':
        num(tm.tm_hour, 2);
        break;
      case 'I':
        num(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12, 2);
        break;
      case 'M':
        num(tm.tm_min, 2);
        break;
      case 'S':
        num(tm.tm_sec, 2);
        break;
      case 'j':
        num(tm.tm_yday + 1, 3);
        break;
      case 'p':
        out += tm.tm_hour < 12 ? "AM" : "PM";
        break;
      case 'B':
        out += kMonths[tm.tm_mon];
        break;
      case 'b':
        out += std::string(kMonths[tm.tm_mon]).substr(0, 3);
        break;
      case 'A':
        out += kDays[tm.tm_wday];
        break;
      case 'a':
        out += std::string(kDays[tm.tm_wday]).substr(0, 3);
        break;
      case 'Z':
        out += "UTC";
        break;
      case 'z':
        out += "+0000";
        break;
      case '%':
        out += '%';
        break;
      default:
        out.append(format.substr(i, j - i + 1));
        break;
    }
    i = j;
  }
  return out;
}

void add_globals(Object& globals, Clock clock) {
  globals.set("range", Value::callable("range", g_range));
  globals.set("namespace", Value::callable("namespace", [](const CallArgs& a) {
                return make_object(a, true, "namespace");
              }));
  globals.set("dict",
              Value::callable("dict", [](const CallArgs& a) { return make_object(a, false, "dict"); }));
  globals.set("len", Value::callable("len", [](const CallArgs& a) {
                a.expect_at_most("len", 1, {});
                return apply_filter("length", arg_required(a, 0, "obj", "len"), {});
              }));
  globals.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& a) -> Value {
                const Value* msg = a.get(0, "message");
                fail("raise_exception: ", msg ? to_string(*msg) : std::string("(no message)"));
              }));
  globals.set("strftime_now", Value::callable("strftime_now", [clock](const CallArgs& a) {
                a.expect_at_most("strftime_now", 1, {});
                const std::string fmt = arg_string(a, 0, "format", "", "strftime_now");
                return Value(format_time(clock ? clock() : std::chrono::system_clock::now(), fmt));
              }));
}

}  // namespace kiln::jinja
