// The project's mutex: std::mutex (so ThreadSanitizer, which intercepts pthreads, sees every lock
// even though the system's abseil is not instrumented) with abseil's thread-safety annotations, so
// ABSL_GUARDED_BY and friends keep working under clang's -Wthread-safety.
#ifndef KVLEDGER_LIB_BASE_MUTEX_H_
#define KVLEDGER_LIB_BASE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace kvledger {

class ABSL_LOCKABLE Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_MUTEX_H_
