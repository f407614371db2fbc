#pragma once
// Internal: the master process's state (server/master.cc runs it; the binary
// upgrade, WINCH and systemd parts are in server/master_upgrade.cc).

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/conf/loader.h"
#include "core/shm.h"
#include "core/shmtx.h"
#include "server/cycle.h"
#include "server/worker.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/stats.h"

namespace vigil::master_detail {

inline constexpr std::int64_t kKillAfterMs = 2000;  // fast stop: SIGKILL what TERM left alive
inline constexpr std::int64_t kYoungDeathMs =
    1000;  // dying younger than this counts toward back-off
inline constexpr std::int64_t kRespawnFirstDelayMs = 100;
inline constexpr std::int64_t kRespawnMaxDelayMs = 10000;

// The shared zone (nginx's "nginx_shared_zone", seed 004): the accept mutex's
// lock word and the workers' slots, each on its own cache line, followed by
// every layer's counter block (counter_blocks(), each a multiple of a cache
// line): Master::init places them there.
struct SharedZone {
  ShmtxShared accept_mutex;
  WorkerSlot workers[kMaxWorkers];
};

// The signals the master acts on; blocked except inside sigsuspend().
inline constexpr int kMasterSignals[] = {SIGCHLD, SIGALRM, SIGTERM, SIGINT,  SIGQUIT,
                                         SIGHUP,  SIGUSR1, SIGUSR2, SIGWINCH};

class Master {
 public:
  // `upgrade_parent`: the old master that started this one (USR2), or 0.
  Master(std::unique_ptr<Cycle> cycle, const ConfLoadOptions& options, Log& log,
         pid_t upgrade_parent = 0)
      : cycle_(std::move(cycle)), options_(options), log_(log), upgrade_parent_(upgrade_parent) {}
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  int run();

 private:
  struct Child {
    pid_t pid = -1;
    int index = 0;  // worker number in its cycle
    int slot = -1;  // shared counters slot
    unsigned generation = 0;
    bool retiring = false;  // told to stop: not respawned
    std::int64_t started = 0;
  };
  struct Respawn {
    int index = 0;
    unsigned generation = 0;
    std::int64_t due = 0;
  };

  Status init();
  void spawn(int index);
  void reap();
  void on_exit(const Child& child, int status);
  void respawn_due(std::int64_t now);
  void reload();
  void stop(bool graceful);
  void signal_children(int signo);
  bool use_accept_mutex() const;
  int take_slot();
  void free_slot(int slot);
  void arm_timer(std::int64_t now);
  bool anything_pending() const;
  void give_up_if_none_left();
  void change_binary();
  void stop_accepting();
  void restart_workers();
  void on_new_binary_exit(int status);
  void tell_systemd(const std::string& state);

  std::unique_ptr<Cycle> cycle_;
  ConfLoadOptions options_;
  Log& log_;
  SharedMemory shm_;
  SharedZone* zone_ = nullptr;
  Shmtx accept_mutex_;
  bool mutex_created_ = false;
  std::vector<Child> children_;
  std::vector<Respawn> respawns_;
  std::vector<int> streak_;  // per worker index: deaths in a row, each young
  std::string pid_path_;
  bool pid_written_ = false;
  bool quitting_ = false;
  bool terminating_ = false;
  bool killed_ = false;
  bool failed_ = false;       // every worker could not start: exit non-zero
  pid_t new_binary_ = 0;      // the master started by USR2, while it runs
  pid_t upgrade_parent_ = 0;  // the old master that started this one, or 0
  bool noaccepting_ = false;  // WINCH stopped the workers; HUP starts them again
  std::int64_t kill_at_ = 0;
  bool slot_used_[kMaxWorkers] = {};
};

std::int64_t now_ms();

}  // namespace vigil::master_detail
