// kiln_runtime_options.arbiter_dir: the runtime takes turns on its devices with other processes
// (and runtimes) by runtime/arbiter.h's token, as `kiln serve --arbiter DIR` does.
#include <algorithm>
#include <string>

#include "api/handles.h"

using namespace kiln;

namespace kiln::api {
namespace {

// The yield hook: evicts every tracked model's owner (its weights and its contexts' KV caches)
// and its device's compute arena, as the server's idle sleep does. Runs on the arbiter's monitor
// thread while no turn is alive.
Result<bool> yield_models(kiln_runtime& runtime) {
  std::lock_guard lock(runtime.models_mutex);
  for (kiln_model* m : runtime.models) {
    for (const auto& w : m->placed) {
      ResidencyManager& residency = runtime.devices->residency(w->device());
      KILN_TRY(residency.evict_owner(w->owner()));
      KILN_TRY(residency.evict_owner(runtime.devices->arena(w->device()).resident_owner()));
    }
  }
  return true;
}

}  // namespace

kiln_status open_arbiter(std::string_view fn, kiln_runtime& runtime, const char* dir, int32_t timeout_ms) {
  if (dir == nullptr || *dir == '\0') return KILN_OK;
  if (timeout_ms > 0) runtime.arbiter_timeout = std::chrono::milliseconds(timeout_ms);
  auto arbiter = Arbiter::open(dir, [&runtime] { return yield_models(runtime); });
  if (!arbiter.ok()) return from_status(fn, arbiter.error());
  runtime.arbiter = std::move(*arbiter);
  return KILN_OK;
}

kiln_status take_turn(std::string_view fn, kiln_runtime& runtime, Arbiter::Use* turn) {
  if (!runtime.arbiter) return KILN_OK;
  auto use = runtime.arbiter->use(Arbiter::Clock::now() + runtime.arbiter_timeout);
  if (!use.ok())
    return fail(KILN_ERROR_FAILED, std::string(fn) + ": the device is busy in another process: " +
                                       use.error().message + " (kiln_runtime_options.arbiter_timeout_ms " +
                                       std::to_string(runtime.arbiter_timeout.count()) + ")");
  *turn = std::move(*use);
  return KILN_OK;
}

void track_model(kiln_model& model) {
  std::lock_guard lock(model.runtime->models_mutex);
  model.runtime->models.push_back(&model);
}

void untrack_model(kiln_model& model) {
  std::lock_guard lock(model.runtime->models_mutex);
  auto& v = model.runtime->models;
  v.erase(std::remove(v.begin(), v.end(), &model), v.end());
}

}  // namespace kiln::api
