#include "serve/http/exchange.h"

#include "serve/http/exchange_state.h"

namespace kiln::serve::http {

ExchangeState::ExchangeState(Request r, std::function<void()> wake)
    : request(std::move(r)), wake_(std::move(wake)) {}

bool ExchangeState::should_wake() {
  if (woken_) return false;
  woken_ = true;
  return true;
}

void ExchangeState::respond(Response response) {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::None) return;
    mode_ = Mode::Complete;
    response_ = std::move(response);
    ended_ = true;
    if (!should_wake()) return;
  }
  wake_();
}

void ExchangeState::stream(Response head) {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::None) return;
    mode_ = Mode::Stream;
    response_ = std::move(head);
    if (!should_wake()) return;
  }
  wake_();
}

bool ExchangeState::write(std::string_view bytes) {
  {
    std::unique_lock lock(mutex_);
    if (mode_ != Mode::Stream || ended_) return false;
    writable_.wait(lock, [&] { return gone_ || unsent_ < kStreamBufferBytes; });
    if (gone_) return false;
    if (bytes.empty()) return true;
    pending_.append(bytes);
    unsent_ += bytes.size();
    if (!should_wake()) return true;
  }
  wake_();
  return true;
}

void ExchangeState::end() {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::Stream || ended_) return;
    ended_ = true;
    if (!should_wake()) return;
  }
  wake_();
}

void ExchangeState::handler_returned() {
  {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    if (mode_ == Mode::None) {
      mode_ = Mode::Complete;
      response_ = Response{
          .status = 500, .content_type = "text/plain", .body = "the route did not answer\n", .headers = {}};
    }
    ended_ = true;
    if (!should_wake()) return;
  }
  wake_();
}

ExchangeState::Output ExchangeState::take() {
  std::lock_guard lock(mutex_);
  woken_ = false;
  Output out;
  if (mode_ == Mode::None) return out;
  if (!head_taken_) {
    head_taken_ = true;
    out.head = std::move(response_);
    out.complete = mode_ == Mode::Complete;
    out.streamed = mode_ == Mode::Stream;
  }
  out.bytes = std::move(pending_);
  pending_.clear();
  out.ended = ended_;
  return out;
}

void ExchangeState::sent(size_t n) {
  {
    std::lock_guard lock(mutex_);
    unsent_ -= std::min(n, unsent_);
  }
  writable_.notify_all();
}

void ExchangeState::client_gone() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex_);
    if (gone_) return;
    gone_ = true;
    callbacks.swap(on_gone_);
  }
  writable_.notify_all();
  for (auto& fn : callbacks) fn();
}

bool ExchangeState::gone() const {
  std::lock_guard lock(mutex_);
  return gone_;
}

void ExchangeState::on_gone(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (!gone_) {
      on_gone_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

Exchange::Exchange(std::shared_ptr<ExchangeState> state) : state_(std::move(state)) {}

Exchange::~Exchange() = default;

const Request& Exchange::request() const { return state_->request; }

void Exchange::respond(Response response) { state_->respond(std::move(response)); }

void Exchange::stream(std::string content_type, Headers headers, int status) {
  state_->stream(Response{
      .status = status, .content_type = std::move(content_type), .body = {}, .headers = std::move(headers)});
}

bool Exchange::write(std::string_view bytes) { return state_->write(bytes); }

void Exchange::end() { state_->end(); }

bool Exchange::client_gone() const { return state_->gone(); }

void Exchange::on_client_gone(std::function<void()> fn) { state_->on_gone(std::move(fn)); }

}  // namespace kiln::serve::http
