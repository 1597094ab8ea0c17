#include "trainer/comm_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

// Debian installs hiredis.h under hiredis/, which gloo's header only looks for with this.
#ifndef HIREDIS_NESTED_INCLUDE
#define HIREDIS_NESTED_INCLUDE 1
#endif
#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include <fmt/format.h>

#include "trainer/comm_util.h"

namespace rankscope::trainer::comm {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr int kRedisConnectTimeoutMs = 2000;

// FileStore::check is protected; it is the only way to ask for a key without waiting.
class CheckableFileStore final : public gloo::rendezvous::FileStore {
 public:
  using FileStore::check;
  using FileStore::FileStore;
};

Status PrepareDirectory(const RendezvousSpec& spec) {
  const std::filesystem::path dir(spec.file_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return IoError(fmt::format("rendezvous store {}: cannot create the directory: {}",
                               spec.Describe(), error.message()));
  }
  if (!std::filesystem::is_directory(dir, error)) {
    return IoError(fmt::format("rendezvous store {}: not a directory", spec.Describe()));
  }
  // Root passes access(W_OK) even on a read-only mount: writing a file is the real test.
  const std::string probe =
      (dir / fmt::format(".rankscope-probe-{}-{}", getpid(),
                         std::hash<std::thread::id>{}(std::this_thread::get_id())))
          .string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return IoError(fmt::format("rendezvous store {}: the directory is not writable: {}",
                               spec.Describe(), std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

// Gloo's RedisStore leaks its connection when connecting fails and reports it through an
// exception; a plain TCP connect first gives a clean message and leaks nothing.
Status ProbeTcp(const RendezvousSpec& spec) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(spec.redis_port);
  const int gai = ::getaddrinfo(spec.redis_host.c_str(), port.c_str(), &hints, &found);
  if (gai != 0) {
    return IoError(fmt::format("cannot reach rendezvous store {}: {}", spec.Describe(),
                               ::gai_strerror(gai)));
  }
  int last_error = ECONNREFUSED;
  bool connected = false;
  for (addrinfo* at = found; at != nullptr && !connected; at = at->ai_next) {
    const int fd = ::socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            at->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    if (::connect(fd, at->ai_addr, at->ai_addrlen) == 0) {
      connected = true;
    } else if (errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      const int ready = ::poll(&waiting, 1, kRedisConnectTimeoutMs);
      int socket_error = ETIMEDOUT;
      socklen_t length = sizeof socket_error;
      if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &socket_error, &length);
      if (ready > 0 && socket_error == 0) {
        connected = true;
      } else {
        last_error = socket_error;
      }
    } else {
      last_error = errno;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (!connected) {
    return IoError(fmt::format("cannot reach rendezvous store {}: {}", spec.Describe(),
                               std::strerror(last_error)));
  }
  return Status::Ok();
}

std::string KeyList(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) text += (text.empty() ? "" : ", ") + key;
  return text;
}

}  // namespace

Result<std::unique_ptr<SharedStore>> SharedStore::Open(const RendezvousSpec& spec,
                                                       std::chrono::milliseconds default_timeout) {
  try {
    if (!spec.file_dir.empty()) {
      RS_RETURN_IF_ERROR(PrepareDirectory(spec));
      auto file_store = std::make_unique<CheckableFileStore>(spec.file_dir);
      CheckableFileStore* raw = file_store.get();
      return std::unique_ptr<SharedStore>(new SharedStore(
          spec, std::move(file_store),
          [raw](const std::vector<std::string>& keys) { return raw->check(keys); },
          default_timeout));
    }
    IgnoreSigpipe();  // hiredis writes to a socket that dies with the Redis server
    RS_RETURN_IF_ERROR(ProbeTcp(spec));
    auto redis_store = std::make_unique<gloo::rendezvous::RedisStore>(spec.redis_host, spec.redis_port);
    gloo::rendezvous::RedisStore* raw = redis_store.get();
    return std::unique_ptr<SharedStore>(new SharedStore(
        spec, std::move(redis_store),
        [raw](const std::vector<std::string>& keys) { return raw->check(keys); },
        default_timeout));
  } catch (const std::exception& e) {
    return IoError(fmt::format("cannot open rendezvous store {}: {}", spec.Describe(),
                               CleanGlooMessage(e.what())));
  } catch (...) {
    return IoError(fmt::format("cannot open rendezvous store {}: unknown error", spec.Describe()));
  }
}

SharedStore::SharedStore(RendezvousSpec spec, std::unique_ptr<gloo::rendezvous::Store> store,
                         CheckFn check, std::chrono::milliseconds default_timeout)
    : spec_(std::move(spec)),
      store_(std::move(store)),
      check_(std::move(check)),
      default_timeout_(default_timeout) {}

SharedStore::~SharedStore() = default;

void SharedStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard lock(mutex_);
  store_->set(key, data);
}

std::vector<char> SharedStore::get(const std::string& key) {
  // Gloo's get() waits in whole seconds with its own 30 s default; wait here first.
  wait({key}, default_timeout_);
  std::lock_guard lock(mutex_);
  return store_->get(key);
}

void SharedStore::wait(const std::vector<std::string>& keys) { wait(keys, default_timeout_); }

void SharedStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  // Gloo's convention: a zero timeout waits forever. Nothing here should, so it means the
  // default instead.
  const auto limit = timeout == gloo::kNoTimeout ? default_timeout_ : timeout;
  const std::vector<size_t> missing = WaitFor(keys, std::chrono::steady_clock::now() + limit);
  if (missing.empty()) return;
  std::vector<std::string> missing_keys;
  for (size_t index : missing) missing_keys.push_back(keys[index]);
  throw gloo::IoException(fmt::format("timed out after {} waiting for key(s) {} in {}",
                                      FormatDuration(limit), KeyList(missing_keys),
                                      spec_.Describe()));
}

bool SharedStore::Has(const std::string& key) {
  std::lock_guard lock(mutex_);
  return check_({key});
}

std::vector<size_t> SharedStore::WaitFor(const std::vector<std::string>& keys,
                                         std::chrono::steady_clock::time_point deadline) {
  std::vector<bool> present(keys.size(), false);
  while (true) {
    std::vector<size_t> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!present[i]) present[i] = Has(keys[i]);
      if (!present[i]) missing.push_back(i);
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace rankscope::trainer::comm
