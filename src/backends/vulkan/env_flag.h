// The Vulkan backend's switches from the environment (KILN_VULKAN_VALIDATION, _FORCE_STAGING,
// _POISON). Thread-safe as getenv is (read at start-up, before threads change the environment).
#pragma once

#include <cstdlib>
#include <cstring>

namespace kiln {

// Whether environment variable `name` is set to something other than "" or "0".
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace kiln
