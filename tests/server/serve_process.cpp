#include "serve_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "http_client.h"

namespace kiln::test {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::unique_ptr<ServeProcess> ServeProcess::start(const std::vector<std::string>& args, std::string* error,
                                                  const std::vector<std::string>& env) {
  int err[2];
  if (pipe(err) != 0) {
    *error = "pipe() failed";
    return nullptr;
  }
  const char* other = std::getenv("KILN_TEST_SERVE_BINARY");  // another build, to compare
  std::vector<std::string> argv_s = {other && *other ? other : KILN_BINARY_DIR "/kiln", "serve"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  if (std::find(args.begin(), args.end(), "--port") == args.end())
    argv_s.insert(argv_s.end(), {"--port", "0"});
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork: the child of a threaded process may only exec.
  std::vector<std::string> env_s = env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const std::string& mine : env) overridden = overridden || mine.rfind(name, 0) == 0;
    if (!overridden) env_s.push_back(entry);
  }
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  // A peer that closes first must not kill the test binary on its next write (httplib's client
  // sends without MSG_NOSIGNAL); the server gets the default disposition back below.
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<ServeProcess> p(new ServeProcess());
  p->pid_ = fork();
  if (p->pid_ < 0) {
    *error = "fork() failed";
    return nullptr;
  }
  if (p->pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test binary
    ::signal(SIGPIPE, SIG_DFL);
    dup2(err[1], 2);
    close(err[0]);
    close(err[1]);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(err[1]);
  p->drain_thread_ = std::thread([raw = p.get(), fd = err[0]] { raw->drain(fd); });

  // "kiln serve: listening on http://127.0.0.1:PORT ..." then "kiln serve: ready: ...".
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    const std::string text = p->log();
    if (p->port_ == 0) {
      if (auto at = text.find("http://127.0.0.1:"); at != std::string::npos)
        p->port_ = std::atoi(text.c_str() + at + 17);
    }
    if (p->port_ > 0 && text.find("ready:") != std::string::npos) break;
    if (!p->alive() || Clock::now() > deadline) {
      *error = "kiln serve did not become ready:\n" + text;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  httplib::Client c("127.0.0.1", p->port_);
  c.set_read_timeout(5);
  for (;;) {
    auto r = c.Get("/health");
    if (r && r->status == 200) break;
    if (!p->alive() || Clock::now() > deadline) {
      *error = "kiln serve did not answer /health with 200:\n" + p->log();
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p;
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }
  if (drain_thread_.joinable()) drain_thread_.join();  // the pipe closes with the process
}

void ServeProcess::drain(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    std::lock_guard lock(log_mutex_);
    log_.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

std::string ServeProcess::log() const {
  std::lock_guard lock(log_mutex_);
  return log_;
}

bool ServeProcess::alive() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

int64_t ServeProcess::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

double ServeProcess::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // Fields after the command name (which ends with the last ')'): utime and stime are 14 and 15.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14) ticks += std::atof(field.c_str());
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int ServeProcess::terminate(std::chrono::milliseconds timeout) {
  signal(SIGTERM);
  return wait_exit(timeout);
}

void ServeProcess::signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

int ServeProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (reaped_) return -1;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    if (Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

json get_slots(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(5);
  auto r = c.Get("/slots");
  if (!r || r->status != 200) return json::array();
  json j = json::parse(r->body, nullptr, false);
  return j.is_array() ? j : json::array();
}

bool wait_slots_idle(int port, std::chrono::milliseconds timeout, json* last) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    json slots = get_slots(port);
    bool idle = !slots.empty();
    for (const auto& s : slots) idle = idle && s.value("is_processing", true) == false;
    if (last) *last = slots;
    if (idle) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RawSocket::RawSocket(int port, int receive_buffer) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  if (receive_buffer > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
  int one = 1;
  if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawSocket::~RawSocket() { close(); }

void RawSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawSocket::send_all(const std::string& bytes) {
  size_t done = 0;
  while (fd_ >= 0 && done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return fd_ >= 0;
}

bool RawSocket::send_slowly(const std::string& bytes, std::chrono::milliseconds gap) {
  for (char ch : bytes) {
    if (!send_all(std::string(1, ch))) return false;
    std::this_thread::sleep_for(gap);
  }
  return true;
}

void RawSocket::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool RawSocket::fill(Clock::time_point deadline) {
  char buf[65536];
  if (fd_ < 0) return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  buffered_.append(buf, static_cast<size_t>(n));
  return true;
}

std::string RawResponse::header(const std::string& name) const {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string h = lower(head), key = "\r\n" + lower(name) + ":";
  const size_t at = h.find(key);
  if (at == std::string::npos) return {};
  size_t from = at + key.size();
  while (from < head.size() && head[from] == ' ') ++from;
  return head.substr(from, head.find("\r\n", from) - from);
}

std::optional<RawResponse> RawSocket::read_response(std::chrono::milliseconds timeout, bool to_head) {
  const auto deadline = Clock::now() + timeout;
  size_t end;
  while ((end = buffered_.find("\r\n\r\n")) == std::string::npos)
    if (!fill(deadline)) return std::nullopt;
  RawResponse r;
  r.head = buffered_.substr(0, end + 2);
  r.status = http_status(r.head);
  size_t at = end + 4;
  if (to_head || r.status / 100 == 1 || r.status == 204 || r.status == 304) {  // no body
    buffered_.erase(0, at);
    return r;
  }
  const std::string length = r.header("Content-Length");
  if (!length.empty()) {
    const size_t n = std::strtoull(length.c_str(), nullptr, 10);
    while (buffered_.size() < at + n)
      if (!fill(deadline)) return std::nullopt;
    r.body = buffered_.substr(at, n);
    buffered_.erase(0, at + n);
    return r;
  }
  if (r.header("Transfer-Encoding") == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buffered_.find("\r\n", at)) == std::string::npos)
        if (!fill(deadline)) return std::nullopt;
      const size_t n = std::strtoull(buffered_.c_str() + at, nullptr, 16);
      while (buffered_.size() < eol + 2 + n + 2)
        if (!fill(deadline)) return std::nullopt;
      r.body += buffered_.substr(eol + 2, n);
      at = eol + 2 + n + 2;
      if (n == 0) break;
    }
    buffered_.erase(0, at);
    return r;
  }
  buffered_.erase(0, at);
  r.body = read_all(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  return r;
}

bool RawSocket::closed_by_peer(std::chrono::milliseconds timeout) {
  if (!buffered_.empty() || fd_ < 0) return fd_ < 0;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char ch;
  return ::recv(fd_, &ch, 1, MSG_PEEK) <= 0;
}

std::string RawSocket::read_all(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (fill(deadline)) {
  }
  std::string out = std::move(buffered_);
  buffered_.clear();
  return out;
}

bool RawSocket::has_input() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;  // POLLIN, POLLHUP or POLLERR: data, EOF or a reset
}

std::string http_post(const std::string& path, const std::string& body, int64_t content_length) {
  const int64_t n = content_length < 0 ? static_cast<int64_t>(body.size()) : content_length;
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n" +
         "Content-Length: " + std::to_string(n) + "\r\n\r\n" + body;
}

int http_status(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

std::string http_body(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  if (end == std::string::npos) return {};
  std::string head = response.substr(0, end);
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string body = response.substr(end + 4);
  if (head.find("\r\ntransfer-encoding: chunked") == std::string::npos) return body;
  // Chunks: SIZE-IN-HEX\r\n DATA \r\n ... 0\r\n\r\n (a cut chunk keeps what arrived).
  std::string out;
  for (size_t at = 0; at < body.size();) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(body.c_str() + at, nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

bool is_openai_error(const std::string& body, std::string* message) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return false;
  const json& e = j["error"];
  if (!e.contains("message") || !e["message"].is_string() || !e.contains("type") || !e["type"].is_string() ||
      !e.contains("code"))
    return false;
  if (message) *message = e["message"].get<std::string>();
  return true;
}

}  // namespace kiln::test
