// The store under a Rendezvous: Gloo's FileStore or RedisStore behind one gloo Store that is
// safe to share between threads and that waits with a real deadline.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "base/status.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer::comm {

// Why not Gloo's stores as they are: a RedisStore holds one connection that two threads
// must not use at once (the training thread and the communication thread both may reach
// the store), and Gloo's wait() counts whole seconds, so a 1.5 s timeout waits 2 s and a
// short probe waits a full second. Here every call takes a mutex, and wait() polls the
// keys every few milliseconds up to the exact deadline.
class SharedStore final : public gloo::rendezvous::Store {
 public:
  // Creates the directory (file:DIR) or connects to Redis. `default_timeout` bounds get()
  // and the wait() without a timeout. Never throws.
  static Result<std::unique_ptr<SharedStore>> Open(const RendezvousSpec& spec,
                                                   std::chrono::milliseconds default_timeout);
  ~SharedStore() override;

  // gloo::rendezvous::Store. Like Gloo's own stores these throw gloo exceptions (set() of
  // an existing key, a timeout, a lost Redis connection): Gloo expects that of a store.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Whether the key is set (throws like the above).
  bool Has(const std::string& key);
  // Polls until every key is set or `deadline` passes; returns the indices (into `keys`)
  // of those still missing, empty when all are there. Throws like the above.
  std::vector<size_t> WaitFor(const std::vector<std::string>& keys,
                              std::chrono::steady_clock::time_point deadline);

  const RendezvousSpec& spec() const { return spec_; }

 private:
  using CheckFn = std::function<bool(const std::vector<std::string>&)>;
  SharedStore(RendezvousSpec spec, std::unique_ptr<gloo::rendezvous::Store> store, CheckFn check,
              std::chrono::milliseconds default_timeout);

  const RendezvousSpec spec_;
  std::mutex mutex_;  // guards store_ (a Redis connection is not thread-safe)
  std::unique_ptr<gloo::rendezvous::Store> store_;
  CheckFn check_;  // the concrete store's check(), which gloo::rendezvous::Store lacks
  const std::chrono::milliseconds default_timeout_;
};

}  // namespace rankscope::trainer::comm
