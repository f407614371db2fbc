// make_cycle (src/server/cycle.cc) maps the configuration's shared zones
// before anything forks, and a reload's cycle reuses the zones of the running
// one that kept their name, size and owner: their contents survive.

#include "server/cycle.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "../core/conf/conf_test_util.h"
#include "vigil/core/log.h"

namespace vigil {
namespace {

const char kTag[] = "cycle test module";

class CycleTest : public testing::ConfDirTest {
 protected:
  // A configuration with no listeners, plus the zones a module would have
  // registered from its directives.
  std::unique_ptr<Configuration> conf_with(std::size_t keep_size) {
    auto r = load("master_process off;\nevents { }\n");
    EXPECT_TRUE(r) << r.status().message();
    if (!r) return nullptr;
    std::unique_ptr<Configuration> conf = std::move(r).value();
    EXPECT_TRUE(conf->zones().add("keep", keep_size, kTag, " in test:1"));
    EXPECT_TRUE(conf->zones().add("fresh", 64 * 1024, kTag, " in test:2"));
    return conf;
  }
  Log log_;
};

TEST_F(CycleTest, ZonesMappedAndKeptAcrossReload) {
  auto c1 = make_cycle(conf_with(64 * 1024), nullptr, log_);
  ASSERT_TRUE(c1) << c1.status().message();
  std::unique_ptr<Cycle> first = std::move(c1).value();
  ShmZone* keep = first->conf->zones().find("keep");
  ASSERT_TRUE(keep->mapped());

  // A worker forked from this cycle writes into the zone.
  pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    char* p = static_cast<char*>(keep->pool().alloc(32));
    if (p == nullptr) ::_exit(2);
    std::strcpy(p, "from a worker");
    keep->pool().set_data(p);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  auto c2 = make_cycle(conf_with(64 * 1024), first.get(), log_);
  ASSERT_TRUE(c2) << c2.status().message();
  std::unique_ptr<Cycle> second = std::move(c2).value();
  first.reset();  // the master drops the old cycle after the reload
  ShmZone* keep2 = second->conf->zones().find("keep");
  EXPECT_TRUE(keep2->reused());
  ASSERT_NE(keep2->pool().data(), nullptr);
  EXPECT_STREQ(static_cast<char*>(keep2->pool().data()), "from a worker");

  // A size change is a new zone: the old contents are not carried over.
  auto c3 = make_cycle(conf_with(128 * 1024), second.get(), log_);
  ASSERT_TRUE(c3) << c3.status().message();
  ShmZone* keep3 = (*c3)->conf->zones().find("keep");
  EXPECT_FALSE(keep3->reused());
  EXPECT_EQ(keep3->pool().data(), nullptr);
}

TEST_F(CycleTest, UnsizedZoneFailsTheCycle) {
  auto r = load("master_process off;\nevents { }\n");
  ASSERT_TRUE(r);
  ASSERT_TRUE((*r)->zones().add("ghost", 0, kTag, " in test:4"));
  auto c = make_cycle(std::move(r).value(), nullptr, log_);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().message(), "zero size shared memory zone \"ghost\" in test:4");
}

}  // namespace
}  // namespace vigil
