#pragma once
// The listening sockets of one configuration, as the master opens them: the
// protocols' Listening objects, each reuseport listener cloned once per worker
// (nginx's ngx_clone_listening) so every worker has a socket of its own, and
// on reload the descriptors of the previous set taken over wherever the same
// socket is still wanted, so no connection is refused while workers change.

#include <memory>
#include <vector>

#include "core/conf/loader.h"
#include "vigil/core/result.h"
#include "vigil/event/listening.h"

namespace vigil {

class Log;

struct ListenerEntry {
  std::unique_ptr<Listening> ls;
  int worker = -1;  // the worker a reuseport clone belongs to; -1: shared by all
};

class ListenerSet {
 public:
  ListenerSet() = default;
  ~ListenerSet() { close_all(); }
  ListenerSet(ListenerSet&&) = default;
  ListenerSet& operator=(ListenerSet&&) = default;
  ListenerSet(const ListenerSet&) = delete;
  ListenerSet& operator=(const ListenerSet&) = delete;

  // Asks every protocol for the listeners `conf` describes; clones each
  // reuseport listener `workers` times. Nothing is opened yet.
  static Result<ListenerSet> create(const Configuration& conf, int workers, Log& log);

  // Opens every socket. An entry of `previous` with the same address,
  // reuseport, ipv6only and worker gives its descriptor (it is moved out of
  // `previous`); backlog, buffers and TCP_DEFER_ACCEPT are applied to it again
  // if they changed. The others are opened with `tries` bind attempts. On
  // failure whatever this call opened is closed and `previous` is untouched.
  Status open(ListenerSet* previous, int tries, Log& log);

  // A set of sockets opened elsewhere (another master, systemd): one shared
  // entry per descriptor, addressed and flagged as the socket says; the i-th
  // reuseport socket of an address is taken as worker i's clone.
  static ListenerSet adopt(std::vector<std::unique_ptr<Listening>> sockets);

  // Closes every descriptor still held.
  void close_all();
  // Unlinks the files of the unix-domain sockets still held (before
  // close_all(), when they are given up for good, as nginx's master does:
  // at its exit unless a new binary took them, and on a reload for those
  // the new configuration does not name).
  void remove_unix_files() const;
  // In a worker after fork: closes the other workers' reuseport clones, so a
  // socket the master closes later is really closed (its queue not orphaned).
  void close_others(int worker);
  // The sockets worker `worker` listens on: the shared ones and its clones.
  std::vector<Listening*> for_worker(int worker) const;

  const std::vector<ListenerEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<ListenerEntry> entries_;
};

// True when `a` and `b` name the same socket to keep across a reload.
bool same_listener(const Listening& a, int a_worker, const Listening& b, int b_worker);

}  // namespace vigil
