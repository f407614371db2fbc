#pragma once
// A lock shared between processes; the accept mutex is built on one (Shmtx).
// The event loop needs only these two operations.

namespace vigil {

class ProcessMutex {
 public:
  virtual ~ProcessMutex() = default;
  virtual bool trylock() = 0;
  virtual void unlock() = 0;
};

}  // namespace vigil
