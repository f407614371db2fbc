// The open_file_cache table (open_file_cache.cc) on real files in a temporary
// directory: hits keep the descriptor, the LRU entry goes when the table is
// full, entries unused for `inactive` go, an entry older than `valid` is
// checked again (same inode: kept, size updated; renamed over or deleted:
// replaced), errors are kept only when asked, min_uses, disable_symlinks
// rules, and a descriptor a response holds outlives its entry.
#include "http/static/open_file_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "http/core/module.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

class OpenFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vigil_ofc.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    (void)std::system(cmd.c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& content) {
    const std::string tmp = path(name) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    ASSERT_EQ(::rename(tmp.c_str(), path(name).c_str()), 0);  // a new inode, as a deploy
  }
  // Reads the whole file through `fd` from offset 0.
  static std::string read_fd(int fd) {
    std::string out;
    char buf[256];
    off_t off = 0;
    for (;;) {
      ssize_t n = ::pread(fd, buf, sizeof buf, off);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      off += n;
    }
    return out;
  }
  // Looks `name` up and returns what it read; the reference is given back.
  std::string get(OpenFileCache& cache, const std::string& name, Msec now, OpenFileParams p = {}) {
    const std::string full = path(name);
    OpenFileInfo info;
    FileRef ref;
    cache.open(full, p, now, info, ref);
    last_err_ = info.err;
    last_size_ = info.size;
    last_cached_ = ref.entry != nullptr;
    if (info.err != 0 || ref.fd == -1) return {};
    std::string body = read_fd(ref.fd);
    if (ref.entry != nullptr) {
      OpenFileCache::release(*ref.entry, now);
    } else {
      ::close(ref.fd);
    }
    return body;
  }
  static std::unique_ptr<OpenFileCache> make(std::uint32_t max, Msec inactive = 60000) {
    auto c = OpenFileCache::create(nullptr, max, inactive);
    EXPECT_TRUE(static_cast<bool>(c));
    return std::move(c.value());
  }

  std::string dir_;
  int last_err_ = 0;
  std::int64_t last_size_ = 0;
  bool last_cached_ = false;
};

TEST_F(OpenFileCacheTest, SecondLookupIsAHitOnTheSameDescriptor) {
  write("a", "alpha");
  auto cache = make(4);
  const std::string a = path("a");
  OpenFileInfo info;
  FileRef r1, r2;
  cache->open(a, {}, 1000, info, r1);
  ASSERT_EQ(info.err, 0);
  EXPECT_TRUE(info.is_file);
  EXPECT_EQ(info.size, 5);
  ASSERT_NE(r1.entry, nullptr);
  cache->open(a, {}, 1001, info, r2);
  EXPECT_EQ(r2.fd, r1.fd) << "a hit hands out the cached descriptor";
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_EQ(cache->misses(), 1u);
  EXPECT_EQ(cache->live(), 1u);
  OpenFileCache::release(*r1.entry, 1002);
  OpenFileCache::release(*r2.entry, 1002);
  EXPECT_NE(::fcntl(r1.fd, F_GETFD), -1) << "released, still cached: still open";
}

TEST_F(OpenFileCacheTest, FullTableEvictsTheLeastRecentlyUsed) {
  write("a", "A");
  write("b", "B");
  write("c", "C");
  auto cache = make(2);
  EXPECT_EQ(get(*cache, "a", 1), "A");
  EXPECT_EQ(get(*cache, "b", 2), "B");
  EXPECT_EQ(get(*cache, "a", 3), "A");  // a is now the most recent
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_EQ(get(*cache, "c", 4), "C");  // evicts b
  EXPECT_EQ(cache->live(), 2u);
  EXPECT_EQ(get(*cache, "a", 5), "A");
  EXPECT_EQ(cache->hits(), 2u) << "a stayed";
  EXPECT_EQ(get(*cache, "b", 6), "B");
  EXPECT_EQ(cache->misses(), 4u) << "b was evicted";
}

TEST_F(OpenFileCacheTest, InactiveEntriesExpire) {
  write("a", "A");
  write("b", "B");
  auto cache = make(4, 1000);
  get(*cache, "a", 0);
  get(*cache, "b", 600);
  cache->expire(999);
  EXPECT_EQ(cache->live(), 2u);
  cache->expire(1000);
  EXPECT_EQ(cache->live(), 1u) << "a unused for inactive";
  get(*cache, "b", 1500);  // used again: lives on
  cache->expire(2000);
  EXPECT_EQ(cache->live(), 1u);
  cache->expire(2500);
  EXPECT_EQ(cache->live(), 0u);
}

TEST_F(OpenFileCacheTest, TimerOnTheLoopEvictsInactiveEntries) {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop) << loop.status().to_string();
  auto created = OpenFileCache::create(loop.value().get(), 4, 50);
  ASSERT_TRUE(created);
  OpenFileCache& cache = *created.value();
  write("a", "A");
  EXPECT_EQ(get(cache, "a", clock::current_msec()), "A");
  ASSERT_EQ(cache.live(), 1u);
  for (int i = 0; i < 200 && cache.live() != 0; ++i) loop.value()->process_events_and_timers();
  EXPECT_EQ(cache.live(), 0u) << "the loop's timer evicted the entry";
}

TEST_F(OpenFileCacheTest, RenamedOverIsSeenAfterValidOnly) {
  write("a", "old");
  auto cache = make(4);
  OpenFileParams p;
  p.valid = 1000;
  EXPECT_EQ(get(*cache, "a", 0, p), "old");
  write("a", "new!");
  EXPECT_EQ(get(*cache, "a", 999, p), "old") << "within valid: the cached descriptor";
  EXPECT_EQ(get(*cache, "a", 1000, p), "new!");
  EXPECT_EQ(last_size_, 4);
  EXPECT_EQ(get(*cache, "a", 1500, p), "new!");
  EXPECT_EQ(cache->live(), 1u);
}

TEST_F(OpenFileCacheTest, ChangedInPlaceKeepsTheDescriptorAndTakesTheNewSize) {
  write("a", "12345");
  auto cache = make(4);
  OpenFileParams p;
  p.valid = 10;
  OpenFileInfo info;
  FileRef r1;
  cache->open(path("a"), p, 0, info, r1);
  ASSERT_NE(r1.entry, nullptr);
  const int fd = r1.fd;
  OpenFileCache::release(*r1.entry, 0);
  FILE* f = std::fopen(path("a").c_str(), "a");  // same inode
  ASSERT_NE(f, nullptr);
  std::fputs("678", f);
  std::fclose(f);
  FileRef r2;
  cache->open(path("a"), p, 20, info, r2);
  EXPECT_EQ(r2.fd, fd);
  EXPECT_EQ(info.size, 8);
  OpenFileCache::release(*r2.entry, 20);
}

TEST_F(OpenFileCacheTest, DeletedFileFailsAfterValidAndErrorsAreKeptOnlyWhenAsked) {
  write("a", "A");
  auto cache = make(4);
  OpenFileParams p;
  p.valid = 100;
  EXPECT_EQ(get(*cache, "a", 0, p), "A");
  ASSERT_EQ(::unlink(path("a").c_str()), 0);
  EXPECT_EQ(get(*cache, "a", 50, p), "A") << "within valid";
  get(*cache, "a", 100, p);
  EXPECT_EQ(last_err_, ENOENT);
  EXPECT_EQ(cache->live(), 0u) << "errors off: not kept";
  write("a", "back");
  EXPECT_EQ(get(*cache, "a", 110, p), "back");

  p.errors = true;
  get(*cache, "missing", 200, p);
  EXPECT_EQ(last_err_, ENOENT);
  EXPECT_EQ(cache->live(), 2u) << "errors on: the error is an entry";
  write("missing", "here");
  get(*cache, "missing", 250, p);
  EXPECT_EQ(last_err_, ENOENT) << "the cached error, within valid";
  EXPECT_EQ(get(*cache, "missing", 300, p), "here");
  OpenFileParams no_errors = p;
  no_errors.errors = false;
  get(*cache, "gone", 400, p);
  EXPECT_EQ(last_err_, ENOENT);
  write("gone", "g");
  EXPECT_EQ(get(*cache, "gone", 401, no_errors), "g")
      << "a location without open_file_cache_errors does not take a cached error";
}

TEST_F(OpenFileCacheTest, MinUsesKeepsTheDescriptorOnlyOnceUsedEnough) {
  write("a", "A");
  auto cache = make(4);
  OpenFileParams p;
  p.min_uses = 3;
  EXPECT_EQ(get(*cache, "a", 0, p), "A");
  EXPECT_FALSE(last_cached_);
  EXPECT_EQ(get(*cache, "a", 1, p), "A");
  EXPECT_FALSE(last_cached_);
  EXPECT_EQ(get(*cache, "a", 2, p), "A");
  EXPECT_TRUE(last_cached_) << "third use";
  EXPECT_EQ(get(*cache, "a", 3, p), "A");
  EXPECT_TRUE(last_cached_);
  EXPECT_EQ(cache->hits(), 1u);
}

TEST_F(OpenFileCacheTest, DirectoriesAreKnownWithoutADescriptor) {
  ASSERT_EQ(::mkdir(path("d").c_str(), 0755), 0);
  auto cache = make(4);
  OpenFileInfo info;
  FileRef ref;
  cache->open(path("d"), {}, 0, info, ref);
  EXPECT_EQ(info.err, 0);
  EXPECT_TRUE(info.is_dir);
  EXPECT_EQ(ref.fd, -1);
  cache->open(path("d"), {}, 1, info, ref);
  EXPECT_TRUE(info.is_dir);
  EXPECT_EQ(cache->hits(), 1u);
}

TEST_F(OpenFileCacheTest, AReferencedDescriptorOutlivesItsEntry) {
  write("a", "first");
  write("b", "B");
  auto cache = make(1);
  OpenFileParams p;
  p.valid = 10;
  OpenFileInfo info;
  FileRef held;
  cache->open(path("a"), p, 0, info, held);  // a response sends from it
  ASSERT_NE(held.entry, nullptr);
  // The only entry is in use: b is served uncached.
  EXPECT_EQ(get(*cache, "b", 1, p), "B");
  EXPECT_FALSE(last_cached_);
  // a replaced: the entry leaves the table but keeps its descriptor.
  write("a", "second");
  EXPECT_EQ(get(*cache, "a", 20, p), "second");
  EXPECT_EQ(cache->detached(), 1u);
  EXPECT_EQ(read_fd(held.fd), "first");
  // The inactive timer's eviction of a held entry waits for it too.
  OpenFileCache::release(*held.entry, 30);
  EXPECT_EQ(cache->detached(), 0u);
  EXPECT_EQ(::fcntl(held.fd, F_GETFD), -1) << "closed with the last reference";
  EXPECT_EQ(get(*cache, "a", 40, p), "second");
  EXPECT_TRUE(last_cached_) << "the slot is free again";
}

TEST_F(OpenFileCacheTest, ExpiryOfAHeldEntryClosesWhenReleased) {
  write("a", "A");
  auto cache = make(2, 100);
  OpenFileInfo info;
  FileRef held;
  cache->open(path("a"), {}, 0, info, held);
  ASSERT_NE(held.entry, nullptr);
  cache->expire(200);
  EXPECT_EQ(cache->live(), 0u);
  EXPECT_EQ(cache->detached(), 1u);
  EXPECT_EQ(read_fd(held.fd), "A");
  OpenFileCache::release(*held.entry, 300);
  EXPECT_EQ(cache->detached(), 0u);
}

TEST_F(OpenFileCacheTest, SymlinkRulesOfTheLookupApply) {
  write("real", "R");
  ASSERT_EQ(::symlink(path("real").c_str(), path("link").c_str()), 0);
  auto cache = make(4);
  // Two locations with their disable_symlinks confs bound, as a loaded
  // configuration binds them (module.h).
  DisableSymlinksConf follow_rule;
  DisableSymlinksConf refuse_rule;
  refuse_rule.mode = DisableSymlinks::kOn;
  HttpLocConf follow;
  HttpLocConf refuse;
  for (auto [loc, rule] : {std::pair{&follow, &follow_rule}, std::pair{&refuse, &refuse_rule}}) {
    loc->module_confs.assign(kMaxHttpModules, nullptr);
    loc->module_confs[disable_symlinks_module().index()] = rule;
  }
  OpenFileParams p;
  p.errors = true;
  p.loc = &follow;
  EXPECT_EQ(get(*cache, "link", 0, p), "R");
  p.loc = &refuse;
  EXPECT_EQ(get(*cache, "link", 1, p), "");
  EXPECT_EQ(last_err_, ELOOP) << "an entry opened under other rules is checked again";
  EXPECT_EQ(get(*cache, "link", 2, p), "");
  EXPECT_EQ(last_err_, ELOOP);
  p.loc = &follow;
  EXPECT_EQ(get(*cache, "link", 3, p), "R");
}

TEST_F(OpenFileCacheTest, ManyNamesReuseEntriesWithoutGrowing) {
  auto cache = make(8);
  for (int i = 0; i < 50; ++i) write("f" + std::to_string(i), std::to_string(i));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(get(*cache, "f" + std::to_string(i), static_cast<Msec>(round * 100 + i)),
                std::to_string(i));
    }
  }
  EXPECT_EQ(cache->live(), 8u);
  EXPECT_EQ(cache->detached(), 0u);
}

TEST_F(OpenFileCacheTest, EntriesAreMadeAsTheTableFills) {
  auto cache = make(100000);
  EXPECT_EQ(cache->allocated(), 0u) << "a large max costs nothing until used";
  write("a", "A");
  EXPECT_EQ(get(*cache, "a", 0), "A");
  EXPECT_GE(cache->allocated(), 1u);
  EXPECT_LE(cache->allocated(), 256u);
  auto small = make(3);
  for (int i = 0; i < 5; ++i) {
    write("s" + std::to_string(i), "x");
    get(*small, "s" + std::to_string(i), static_cast<Msec>(i));
  }
  EXPECT_EQ(small->allocated(), 3u) << "never more than max";
}

TEST(OpenFileCacheCreate, ZeroEntriesIsAnError) {
  EXPECT_FALSE(static_cast<bool>(OpenFileCache::create(nullptr, 0, 1000)));
}

}  // namespace
}  // namespace vigil::http
