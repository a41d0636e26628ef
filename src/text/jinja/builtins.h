// The engine's built-in filters, tests, methods and globals (builtins_*.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "text/jinja/value.h"

namespace kiln::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

// Applies filter `name` (which must be known) to `operand`. Throws TemplateError on bad use.
Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args);
// Runs test `name` (which must be known) on `operand`.
bool apply_test(std::string_view name, const Value& operand, const CallArgs& args);

// `receiver.name` for a name that is no key of the receiver: a bound method such as
// str.strip or dict.items (a callable), list/str `length`, or undefined.
Value member_of(const Value& receiver, std::string_view name);

using Clock = std::function<std::chrono::system_clock::time_point()>;
// Fills `globals` with range, namespace, dict, len, raise_exception, strftime_now (read from
// `clock`, in UTC), and the constants true/false/none in both spellings.
void add_globals(Object& globals, Clock clock);

// strftime over a UTC time: %Y %y %m %d %e %H %I %M %S %p %b %B %a %A %j %Z %z %%
// (English names); `%-d` style flags drop the zero padding. Other codes are kept as written.
std::string format_time(std::chrono::system_clock::time_point t, std::string_view format);

}  // namespace kiln::jinja
