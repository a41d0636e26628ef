// ModelRouter: the models of a server of many models (llama-server's router mode, in one process).
// Each model (a ModelSpec) is unloaded, loading or loaded; a loaded model has a ServerState of its
// own (context, engine, slots with their token history, a backend of its own) over the server's
// one DeviceRegistry, so every model's memory is a resident of the same residency managers and
// shares their budgets (--max-mem).
//
// Requests (acquire()) pin their model for the whole request, and the device's compute arena
// (DeviceRegistry::arena: one per device, every model computes in it by turns, sized for the
// largest of their worst cases): a model in the middle of a request is never evicted, nor the
// arena its passes need. A model that is loaded but evicted (another model's allocation made
// room) is "sleeping": its state stays (the slots' token history; on a device that is not the
// host, the KV cache is copied out), and the next request's pin restores it bit-exact, so a
// returning conversation reuses its prompt cache. A request that finds no room (other models
// pinned by their requests) waits, holding no pin, until a request ends or timeout_seconds pass,
// then answers 503 with the manager's numbers. When nothing is pinned by a request the refusal
// is final at once (the model does not fit even alone).
//
// With --arbiter (set_arbiter), the device is shared with other processes by a token: acquire()
// and load() take a use of it first (the wait counts toward --residency-timeout) and a request's
// lease keeps it, so models load, restore and compute only while this process holds it; the
// arbiter's yield hook is evict_idle_models().
//
// --models-max: at most that many models loaded (0: no limit); loading one more unloads the least
// recently used model with no request (its state is dropped: unlike eviction, its prompt cache
// is lost).
//
// Thread-safety: every method may be called from any thread. Lock order: the router's mutex, then
// a residency manager's; a model is loaded, pinned and freed with the router's mutex released.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "runtime/residency.h"
#include "serve/api_json.h"
#include "serve/server.h"

namespace kiln::serve {

struct ServerState;
struct ModelInfo;

// llama-server's model states; Sleeping: loaded, with its memory evicted.
enum class ModelStatus { Unloaded, Loading, Loaded, Sleeping };
const char* model_status_name(ModelStatus s);

class ModelRouter {
 public:
  // `base`: the server's options (each model's own ModelSpec fields replace theirs).
  ModelRouter(const ServerOptions& base, std::shared_ptr<DeviceRegistry> devices);
  ~ModelRouter();  // stop(), then frees every state
  ModelRouter(const ModelRouter&) = delete;
  ModelRouter& operator=(const ModelRouter&) = delete;

  struct Listing {
    std::string name, path;
    ModelStatus status = ModelStatus::Unloaded;
    bool pinned = false;  // ModelSpec::pin
    // What its requests may carry: its mmproj's encoders (mmproj_encoders, read from the file's
    // header when the router is made; both false without an mmproj or when the file cannot be read,
    // which loading the model then reports).
    bool vision = false, audio = false;
  };
  std::vector<Listing> list() const;  // in the order of the options
  bool has(const std::string& name) const;

  // For a request that needs model `name`: its state, loaded first when unloaded (with autoload;
  // else 400) and pinned on its device until the returned pointer and every copy are gone. 404
  // for an unknown model; 503 when it cannot be loaded or get room in time.
  std::variant<std::shared_ptr<ServerState>, HttpError> acquire(const std::string& name, bool autoload);
  // POST /models/load: loads `name` now (not pinned). 400 when it is already loaded or loading.
  std::optional<HttpError> load(const std::string& name);
  // POST /models/unload: drops `name`'s state; requests in flight keep it until they end. 400
  // when it is not loaded.
  std::optional<HttpError> unload(const std::string& name);
  // Loads the models whose spec says load_on_startup; the first error.
  Status load_startup_models();

  // The state of `name` when loaded now (never loads, never pins: not activity), else null.
  std::shared_ptr<ServerState> peek(const std::string& name) const;
  // What is known of `name` since it first loaded; null before.
  std::shared_ptr<const ModelInfo> info(const std::string& name) const;

  // The registry every model's state runs on (the shared budgets).
  const std::shared_ptr<DeviceRegistry>& devices() const { return devices_; }

  // Cancels every generation and refuses new requests.
  void stop();

  // --arbiter: the token requests and loads take first (before the first request; it must
  // outlive every lease).
  void set_arbiter(Arbiter* arbiter) { arbiter_ = arbiter; }
  // For the arbiter's yield: evicts every loaded model's memory (as idle sleep does) when no
  // engine generates; false when one does (the token stays, the yield is tried again). Called
  // while no lease is alive.
  Result<bool> evict_idle_models();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry;
  class Lease;
  Entry* find(const std::string& name) const;  // under mu_
  bool others_pinned(const Entry& e) const;    // under mu_: another model's request holds a pin
  // One request's wait for room, up to its --residency-timeout deadline.
  struct RoomWait {
    Clock::time_point deadline;
    std::optional<Clock::time_point> grace_end;  // set at the first refusal with no other pins
  };
  // Under mu_, after room for `e` was refused: waits and says whether to try again. While another
  // model's request holds a pin, until a change or the deadline (its end frees room). Else for a
  // short grace only (1 s, polled every 20 ms, within the deadline): a request's lease ends when
  // its last event is handed to the socket, and its engine's pass may keep the memory pinned a
  // moment longer, unseen by the router; past the grace nothing is coming and the refusal stands.
  bool wait_for_room(std::unique_lock<std::mutex>& lock, const Entry& e, RoomWait& wait);
  // Under mu_ (held by `lock`, released while loading): makes `e` loaded. nullopt when it is
  // (or another thread loads it: the caller looks again); else the error to answer.
  std::optional<HttpError> load_locked(std::unique_lock<std::mutex>& lock, Entry& e, RoomWait& wait);
  void release(Entry& e);  // a lease ended
  void idle_sleeper();     // evicts models idle for their sleep_idle_seconds

  ServerOptions base_;
  std::shared_ptr<DeviceRegistry> devices_;
  Arbiter* arbiter_ = nullptr;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // a lease ended, a load finished, a state was dropped, stopping_
  std::vector<std::unique_ptr<Entry>> entries_;
  uint64_t clock_ = 0;
  bool stopping_ = false;
  std::thread sleeper_;  // only when a model has sleep_idle_seconds > 0
};

}  // namespace kiln::serve
