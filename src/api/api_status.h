// How the C API's functions report: a kiln_status, and the message kiln_last_error() returns on
// the calling thread. Every exported function runs its body through api_call(), which turns a
// kiln Error into KILN_ERROR_FAILED and an exception (std::bad_alloc, ...) into one too, so no
// C++ exception crosses the C boundary.
// Thread-safety: the message is thread-local.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "kiln/kiln.h"

namespace kiln::api {

// Records `message` as this thread's last error and returns `status`.
kiln_status fail(kiln_status status, std::string message);
// KILN_ERROR_ARGUMENT with "FUNCTION: message".
kiln_status bad_argument(std::string_view function, std::string_view message);
// KILN_ERROR_FAILED with "FUNCTION: the error's message"; KILN_OK for an ok Status.
kiln_status from_status(std::string_view function, const Status& status);

// Runs `body` (returning kiln_status); exceptions become KILN_ERROR_FAILED naming `function`.
template <class Body>
kiln_status api_call(std::string_view function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_FAILED, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(KILN_ERROR_FAILED, std::string(function) + ": unknown exception");
  }
}

}  // namespace kiln::api
