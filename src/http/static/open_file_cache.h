#pragma once
// nginx's open_file_cache for the static handler (ngx_open_file_cache.c):
// per worker, a table of the files the static handler opened, keyed by the
// file name, that keeps each one's descriptor and what fstat() said (size,
// mtime, inode/device, directory or not) and, with open_file_cache_errors,
// the error open() gave. A hit costs no open/fstat/close.
//
// Shape:
// - At most `max` entries, made in chunks of 256 as the table fills (so a
//   large `max` costs memory only when used) and never freed while the
//   worker runs; a hash of buckets over them (made when the worker starts),
//   an LRU list of the live entries and a free list: after warm-up a lookup
//   allocates nothing (an entry's name keeps its capacity when the entry is
//   reused). A chunk that cannot be had leaves the file uncached.
// - An entry older than `valid` is checked again by opening the name (with
//   the disable_symlinks rules of the request): the same inode keeps the
//   descriptor and takes the new size/mtime; another file (renamed over,
//   deleted) replaces it.
// - Entries unused for `inactive` are evicted by a timer on the loop; the
//   LRU entry is evicted when the table is full.
// - A response holds a reference (FileRef) on the entry whose descriptor it
//   sends: an entry evicted or replaced while referenced leaves the table
//   (a later lookup does not see it) and closes its descriptor when the last
//   reference goes. If no entry can be had (all in use), the file is served
//   uncached, with a descriptor of its own.

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/core/conf.h"
#include "http/static/disable_symlinks.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"
#include "vigil/event/event.h"

namespace vigil {
class EventLoop;
}

namespace vigil::http {

class OpenFileCache;
struct Request;
struct CachedFile;

// What opening a file name found.
struct OpenFileInfo {
  int err = 0;              // errno of the failed call (0: opened)
  const char* failed = "";  // the call that failed ("open", "fstat")
  std::int64_t size = 0;
  std::time_t mtime = 0;
  ino_t ino = 0;
  dev_t dev = 0;
  bool is_dir = false;
  bool is_file = false;  // a regular file
  bool is_exec = false;  // executable by its owner (rewrite's -x, as nginx)
};

// The descriptor a request uses: owned (entry null: close it) or an
// entry's (release the reference).
struct FileRef {
  int fd = -1;
  CachedFile* entry = nullptr;
};

// The rules a lookup applies (from the request's location).
struct OpenFileParams {
  Msec valid = 60000;
  std::uint32_t min_uses = 1;
  bool errors = false;
  const HttpLocConf* loc = nullptr;  // disable_symlinks; null: follow links
  const Request* r = nullptr;        // its $document_root for from= (null: loc's root)
};

// Opens `name` (disable_symlinks of `loc` when not null, with the document
// root of `r` for from=$document_root) and fstat()s it;
// a directory is closed again (only its info is kept). Fills `info`; on
// success `fd` is the open descriptor (-1 for a directory).
void open_and_stat(const char* name, const HttpLocConf* loc, const Request* r, OpenFileInfo& info,
                   int& fd);

struct CachedFile {
  std::string name;  // the key; its capacity is kept when the entry is reused
  std::size_t hash = 0;
  CachedFile* hnext = nullptr;  // bucket chain
  CachedFile* prev = nullptr;   // LRU list (most recent first), or free list (next)
  CachedFile* next = nullptr;
  OpenFileCache* cache = nullptr;
  OpenFileInfo info;
  int fd = -1;         // -1: an error, a directory, or not used min_uses times yet
  Msec validated = 0;  // when opened or last checked
  Msec accessed = 0;
  std::uint32_t uses = 0;  // lookups since it was made (min_uses)
  std::uint32_t refs = 0;  // responses sending from fd
  // The disable_symlinks rules it was opened under: a lookup under other
  // rules checks it again.
  DisableSymlinks symlinks = DisableSymlinks::kOff;
  std::string symlinks_from;
  enum class State : std::uint8_t { kFree, kLive, kDetached } state = State::kFree;
};

class OpenFileCache {
 public:
  // `max` entries (>= 1) and `inactive`; the timer runs on `loop` (null:
  // none, for tests that call expire() themselves).
  static Result<std::unique_ptr<OpenFileCache>> create(EventLoop* loop, std::uint32_t max,
                                                       Msec inactive);
  ~OpenFileCache();
  OpenFileCache(const OpenFileCache&) = delete;
  OpenFileCache& operator=(const OpenFileCache&) = delete;

  // The file `name` (NUL-terminated after its size) as of `now`: from the
  // table, or opened (and entered). Fills `info`; on success (info.err == 0)
  // `ref` is the descriptor to serve from (fd -1 for a directory): close it
  // when ref.entry is null, else give it back with release().
  void open(std::string_view name, const OpenFileParams& p, Msec now, OpenFileInfo& info,
            FileRef& ref);
  // Drops a reference handed out by open(): the entry counts as used at
  // `now`, or, if it left the table, closes once no response holds it.
  static void release(CachedFile& e, Msec now);

  // Evicts the entries unused for `inactive` as of `now` (the timer's work).
  void expire(Msec now);

  std::uint32_t max() const { return max_; }
  std::uint32_t allocated() const { return allocated_; }  // entries made so far
  std::uint32_t live() const { return live_; }            // entries in the table
  std::uint32_t detached() const { return detached_; }    // left it, still referenced
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  OpenFileCache(EventLoop* loop, std::uint32_t max, Msec inactive);
  CachedFile* find(std::string_view name, std::size_t hash) const;
  CachedFile* take_slot();
  void insert(CachedFile& e, std::string_view name, std::size_t hash, Msec now);
  void unlink(CachedFile& e);  // out of the hash and the LRU list
  void evict(CachedFile& e);   // out of the table: freed, or detached while referenced
  void free_slot(CachedFile& e);
  bool grow();  // one more chunk of entries onto the free list
  void touch(CachedFile& e, Msec now);
  void arm_timer(Msec now);
  static void timer_handler(Event& ev);
  // Fills `info`/`ref` from the entry, taking a reference when it has a fd.
  void hand_out(CachedFile& e, OpenFileInfo& info, FileRef& ref);

  EventLoop* loop_;
  std::uint32_t max_;
  Msec inactive_;
  std::vector<std::unique_ptr<CachedFile[]>> chunks_;  // capacity reserved for max_
  std::uint32_t allocated_ = 0;
  std::vector<CachedFile*> buckets_;
  std::size_t mask_ = 0;
  CachedFile lru_;  // sentinel: lru_.next most recent, lru_.prev least
  CachedFile* free_ = nullptr;
  std::uint32_t live_ = 0;
  std::uint32_t detached_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  Event timer_;
};

}  // namespace vigil::http
