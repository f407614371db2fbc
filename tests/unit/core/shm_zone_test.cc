// Shared zones (src/core/shm_zone.cc): registration and its conflicts, the
// mapping and init, reuse across a "reload" (a second registry mapped with the
// first as previous), forked children writing into a zone the parent reads,
// and registration from a directive through Configuration::load.

#include "core/shm_zone.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>

#include "conf/conf_test_util.h"
#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "core/core_module.h"

namespace vigil {
namespace {

const char kTagA[] = "module a";  // two modules' keys
const char kTagB[] = "module b";
constexpr std::size_t kPage = SlabPool::kPageSize;

TEST(SharedZonesAdd, SameNameSameZone) {
  SharedZones zones;
  auto a = zones.add("one", 64 * kPage, &kTagA, " in x.conf:1");
  ASSERT_TRUE(a) << a.status().message();
  auto again = zones.add("one", 64 * kPage, &kTagA, " in x.conf:2");
  ASSERT_TRUE(again);
  EXPECT_EQ(*a, *again);
  auto other = zones.add("two", 8 * kPage, &kTagA, " in x.conf:3");
  ASSERT_TRUE(other);
  EXPECT_NE(*a, *other);
  EXPECT_EQ(zones.zones().size(), 2u);
  EXPECT_EQ(zones.find("one"), *a);
  EXPECT_EQ(zones.find("three"), nullptr);
  EXPECT_EQ((*a)->where(), " in x.conf:1");
  EXPECT_FALSE((*a)->mapped());
}

TEST(SharedZonesAdd, Conflicts) {
  SharedZones zones;
  ASSERT_TRUE(zones.add("one", 64 * kPage, &kTagA, " in x.conf:1"));
  auto size = zones.add("one", 32 * kPage, &kTagA, " in x.conf:7");
  ASSERT_FALSE(size);
  EXPECT_EQ(size.status().message(),
            "the size 131072 of shared memory zone \"one\" conflicts with already declared size "
            "262144 in x.conf:7");
  auto tag = zones.add("one", 64 * kPage, &kTagB, " in x.conf:8");
  ASSERT_FALSE(tag);
  EXPECT_EQ(tag.status().message(),
            "the shared memory zone \"one\" is already declared for a different use in x.conf:8");
  auto small = zones.add("tiny", 8 * kPage - 1, &kTagA, " in x.conf:9");
  ASSERT_FALSE(small);
  EXPECT_EQ(small.status().message(), "zone \"tiny\" is too small in x.conf:9");
  EXPECT_TRUE(zones.add("tiny", 8 * kPage, &kTagA, " in x.conf:10"));
}

TEST(SharedZonesAdd, ReferenceThenSize) {
  SharedZones zones;
  auto ref = zones.add("z", 0, &kTagA, " in x.conf:1");  // limit_req zone=z
  ASSERT_TRUE(ref);
  EXPECT_EQ((*ref)->size(), 0u);
  auto def = zones.add("z", 16 * kPage, &kTagA, " in x.conf:5");  // limit_req_zone ... zone=z:64k
  ASSERT_TRUE(def);
  EXPECT_EQ(*ref, *def);
  EXPECT_EQ((*def)->size(), 16 * kPage);
  EXPECT_EQ((*def)->where(), " in x.conf:5");
  EXPECT_TRUE(zones.add("z", 0, &kTagA, " in x.conf:9"));  // a later reference

  SharedZones unsized;
  ASSERT_TRUE(unsized.add("lost", 0, &kTagA, " in x.conf:3"));
  Status s = unsized.map(nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "zero size shared memory zone \"lost\" in x.conf:3");
}

// What a module keeps at the start of its zone.
struct Shared {
  std::atomic<long> counter;
  long generation_created;
};

ShmZoneInit counting_init(int* calls, void** seen_old, long generation) {
  return [=](ShmZone& zone, void* old_data) -> Status {
    ++*calls;
    *seen_old = old_data;
    if (old_data != nullptr) {
      zone.set_data(old_data);  // the same memory: adopt the old state
      return Status::ok();
    }
    void* p = zone.pool().calloc(sizeof(Shared));
    if (p == nullptr) return Status::error("no memory in zone " + zone.name());
    auto* sh = new (p) Shared{};
    sh->generation_created = generation;
    zone.pool().set_data(sh);
    zone.set_data(sh);
    return Status::ok();
  };
}

TEST(SharedZonesMap, FreshThenReusedAcrossReload) {
  int calls1 = 0, calls2 = 0, calls3 = 0;
  void* old1 = reinterpret_cast<void*>(1);
  void* old2 = nullptr;
  void* old3 = reinterpret_cast<void*>(1);

  auto first = std::make_unique<SharedZones>();
  ShmZone* keep = *first->add("keep", 16 * kPage, &kTagA, "");
  ShmZone* resize = *first->add("resize", 16 * kPage, &kTagA, "");
  ShmZone* owner = *first->add("owner", 16 * kPage, &kTagA, "");
  ShmZone* dropped = *first->add("dropped", 16 * kPage, &kTagA, "");
  keep->set_init(counting_init(&calls1, &old1, 1));
  ASSERT_TRUE(first->map(nullptr));
  EXPECT_TRUE(first->mapped());
  EXPECT_EQ(calls1, 1);
  EXPECT_EQ(old1, nullptr);
  ASSERT_TRUE(keep->mapped());
  EXPECT_FALSE(keep->reused());
  auto* sh = static_cast<Shared*>(keep->data());
  ASSERT_NE(sh, nullptr);
  sh->counter = 41;
  for (ShmZone* z : {resize, owner, dropped}) {
    ASSERT_TRUE(z->mapped());
    EXPECT_NE(z->pool().alloc(100), nullptr);
  }

  // The reload: same name/size/tag reused, a new size or owner gets new memory.
  auto second = std::make_unique<SharedZones>();
  ShmZone* keep2 = *second->add("keep", 16 * kPage, &kTagA, "");
  ShmZone* resize2 = *second->add("resize", 32 * kPage, &kTagA, "");
  ShmZone* owner2 = *second->add("owner", 16 * kPage, &kTagB, "");
  ShmZone* added2 = *second->add("added", 16 * kPage, &kTagA, "");
  keep2->set_init(counting_init(&calls2, &old2, 2));
  added2->set_init(counting_init(&calls3, &old3, 2));
  ASSERT_TRUE(second->map(first.get()));
  EXPECT_TRUE(keep2->reused());
  EXPECT_EQ(keep2->addr(), keep->addr());
  EXPECT_EQ(calls2, 1);
  EXPECT_EQ(old2, sh);
  EXPECT_EQ(keep2->data(), sh);
  EXPECT_EQ(keep2->pool().data(), sh);  // the pool header carried over too
  EXPECT_EQ(static_cast<Shared*>(keep2->data())->counter.load(), 41);
  EXPECT_EQ(calls3, 1);
  EXPECT_EQ(old3, nullptr);
  for (ShmZone* z : {resize2, owner2, added2}) {
    EXPECT_FALSE(z->reused()) << z->name();
    EXPECT_NE(z->addr(), keep->addr());
  }
  EXPECT_NE(resize2->addr(), resize->addr());
  EXPECT_NE(owner2->addr(), owner->addr());
  // Fresh pools: nothing allocated in them (apart from init's struct).
  EXPECT_EQ(resize2->pool().stats().pages_free, resize2->pool().stats().pages_total);

  // The old generation goes away: the reused memory stays mapped and usable.
  first.reset();
  static_cast<Shared*>(keep2->data())->counter += 1;
  EXPECT_EQ(static_cast<Shared*>(keep2->data())->counter.load(), 42);
  EXPECT_NE(keep2->pool().alloc(1000), nullptr);
  SlabLock l(keep2->pool());
  EXPECT_EQ(keep2->pool().verify_locked(), "");
}

TEST(SharedZonesMap, InitFailureFailsTheMap) {
  SharedZones zones;
  ShmZone* z = *zones.add("bad", 8 * kPage, &kTagA, "");
  z->set_init([](ShmZone& zone, void*) {
    return Status::error("cannot init zone \"" + zone.name() + "\"");
  });
  Status s = zones.map(nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "cannot init zone \"bad\"");
  EXPECT_FALSE(zones.mapped());
}

// The master maps, the workers it forks write, the master reads.
TEST(SharedZonesMap, ChildrenWriteParentSees) {
  SharedZones zones;
  int calls = 0;
  void* old = nullptr;
  ShmZone* z = *zones.add("hits", 64 * kPage, &kTagA, "");
  z->set_init(counting_init(&calls, &old, 1));
  ASSERT_TRUE(zones.map(nullptr));
  auto* sh = static_cast<Shared*>(z->data());

  constexpr int kChildren = 3;
  constexpr int kEach = 200;
  pid_t pids[kChildren];
  for (int c = 0; c < kChildren; ++c) {
    pids[c] = ::fork();
    ASSERT_NE(pids[c], -1);
    if (pids[c] == 0) {
      // Each child allocates records from the zone's pool and counts them.
      for (int i = 0; i < kEach; ++i) {
        auto* rec = static_cast<long*>(z->pool().alloc(sizeof(long)));
        if (rec == nullptr) ::_exit(2);
        *rec = c;
        sh->counter.fetch_add(1);
      }
      ::_exit(0);
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(sh->counter.load(), kChildren * kEach);
  SlabStats st = z->pool().stats();
  EXPECT_EQ(st.classes[0].used, static_cast<std::size_t>(kChildren * kEach));
  // A lock left by a dead process is released by force_unlock.
  pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    z->pool().lock();
    ::_exit(0);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(z->pool().trylock());
  auto released = zones.force_unlock(pid);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], "hits");
  EXPECT_TRUE(z->pool().trylock());
  z->pool().unlock();
}

// A directive registers a zone through DirectiveCall::zones(): the
// Configuration owns the registry; conflicts name the directive's file:line.
struct ZoneConf {
  std::vector<ShmZone*> zones;
};

const Module& zone_module() {
  static const Module* m = [] {
    auto* mod = new Module("toy_zone");
    auto conf = mod->add_conf<ZoneConf>(kMainConf);
    // toy_zone NAME SIZE [TAG]
    mod->add("toy_zone", kMainConf, Arity::between(2, 3),
             conf.custom([](const DirectiveCall& call, ZoneConf& c) -> Status {
               auto size = parse_size(call.arg(1));
               if (!size) return call.invalid_value(1);
               const void* tag = call.arg_count() == 3 ? &kTagB : &kTagA;
               auto z = call.zones().add(call.arg(0), static_cast<std::size_t>(*size), tag,
                                         call.where());
               if (!z) return z.status();
               c.zones.push_back(*z);
               return Status::ok();
             }))
        .multiple = true;
    return mod;
  }();
  return *m;
}

class ZoneConfTest : public testing::ConfDirTest {
 protected:
  Result<std::unique_ptr<Configuration>> load_toy(std::string_view text) {
    write("conf/vigil.conf", text);
    ConfLoadOptions o = options();
    o.modules = &registry_;
    return Configuration::load(o);
  }
  ModuleRegistry registry_{&zone_module(), &core_module()};
};

TEST_F(ZoneConfTest, DirectivesRegisterAndConflictsNameTheLine) {
  auto r = load_toy("toy_zone a 64k;\ntoy_zone b 1m;\ntoy_zone a 64k;\n");
  ASSERT_TRUE(r) << r.status().message();
  Configuration& conf = **r;
  EXPECT_EQ(conf.zones().zones().size(), 2u);
  const auto& zc = conf.get<ZoneConf>(zone_module());
  ASSERT_EQ(zc.zones.size(), 3u);
  EXPECT_EQ(zc.zones[0], zc.zones[2]);
  EXPECT_EQ(zc.zones[1]->size(), 1024u * 1024);
  EXPECT_EQ(zc.zones[0]->where(), " in conf/vigil.conf:1");

  auto bad = load_toy("toy_zone a 64k;\n\ntoy_zone a 128k;\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "the size 131072 of shared memory zone \"a\" conflicts with already declared size "
            "65536 in conf/vigil.conf:3");
  bad = load_toy("toy_zone a 64k;\ntoy_zone a 64k other;\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "the shared memory zone \"a\" is already declared for a different use in "
            "conf/vigil.conf:2");
  bad = load_toy("toy_zone small 16k;\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "zone \"small\" is too small in conf/vigil.conf:1");
}

TEST_F(ZoneConfTest, ReloadKeepsTheZoneOfTheSameConfig) {
  auto r1 = load_toy("toy_zone a 64k;\ntoy_zone b 64k;\n");
  ASSERT_TRUE(r1);
  ASSERT_TRUE((*r1)->zones().map(nullptr));
  ShmZone* a1 = (*r1)->zones().find("a");
  auto* mark = static_cast<char*>(a1->pool().alloc(16));
  std::strcpy(mark, "survives");
  a1->pool().set_data(mark);

  auto r2 = load_toy("toy_zone a 64k;\ntoy_zone b 128k;\n");
  ASSERT_TRUE(r2);
  ASSERT_TRUE((*r2)->zones().map(&(*r1)->zones()));
  ShmZone* a2 = (*r2)->zones().find("a");
  ShmZone* b2 = (*r2)->zones().find("b");
  EXPECT_TRUE(a2->reused());
  EXPECT_FALSE(b2->reused());
  r1->reset();  // the old generation is dropped
  ASSERT_NE(a2->pool().data(), nullptr);
  EXPECT_STREQ(static_cast<char*>(a2->pool().data()), "survives");
}

}  // namespace
}  // namespace vigil
