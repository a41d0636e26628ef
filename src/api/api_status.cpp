#include "api/api_status.h"

namespace kiln::api {
namespace {

thread_local std::string t_last_error;

}  // namespace

kiln_status fail(kiln_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

kiln_status bad_argument(std::string_view function, std::string_view message) {
  return fail(KILN_ERROR_ARGUMENT, std::string(function) + ": " + std::string(message));
}

kiln_status from_status(std::string_view function, const Status& status) {
  if (status.ok()) return KILN_OK;
  return fail(KILN_ERROR_FAILED, std::string(function) + ": " + status.error().message);
}

}  // namespace kiln::api

extern "C" const char* kiln_last_error(void) { return kiln::api::t_last_error.c_str(); }
