// The one module registry: what the server is built with, in load order, and
// the rule that lets layers claim context bits on their own — no two modules
// open blocks of the same context.
#include "server/modules.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/core_module.h"
#include "event/event_conf.h"
#include "http/core/conf.h"
#include "stream/stream_conf.h"
#include "vigil/core/counters.h"
#include "vigil/event/stats.h"

namespace vigil {
namespace {

TEST(ServerModules, BuiltinOrderAndConfRegistry) {
  auto mods = server_modules();
  ASSERT_GE(mods.size(), 4u);
  EXPECT_STREQ(mods[0].name, "core");
  EXPECT_STREQ(mods[1].name, "events");
  EXPECT_EQ(mods[0].conf, &core_module());
  EXPECT_EQ(mods[1].conf, &event_module());
  const auto& conf = server_conf_modules().modules();
  // The conf registry is exactly the modules that have a conf, in order.
  std::size_t i = 0;
  for (const ServerModule& m : mods) {
    if (m.conf == nullptr) continue;
    ASSERT_LT(i, conf.size());
    EXPECT_EQ(conf[i], m.conf) << m.name;
    ++i;
  }
  EXPECT_EQ(i, conf.size());
  EXPECT_NE(server_conf_modules().index_of(http::http_module()), ModuleRegistry::npos);
  EXPECT_NE(server_conf_modules().index_of(stream::stream_module()), ModuleRegistry::npos);
}

TEST(ServerModules, NoTwoModulesOpenTheSameContext) {
  ConfContextMask seen = kMainConf;  // core's own
  std::string owner_of[32];
  for (const ServerModule& m : server_modules()) {
    if (m.conf == nullptr) continue;
    ConfContextMask mine = 0;
    for (const Directive& d : m.conf->directives()) mine |= d.opens;
    EXPECT_EQ(mine & kMainConf, 0u) << m.name << " opens the main context";
    for (int bit = 0; bit < 32; ++bit) {
      if ((mine & (1u << bit)) == 0) continue;
      EXPECT_EQ(seen & (1u << bit), 0u)
          << m.name << " opens context bit " << bit << " already opened by " << owner_of[bit];
      owner_of[bit] = m.name;
    }
    seen |= mine;
  }
  // The builtin blocks are there.
  EXPECT_NE(seen & kEventsConf, 0u);
  EXPECT_NE(seen & kHttpMainConf, 0u);
  EXPECT_NE(seen & kStreamMainConf, 0u);
}

TEST(ServerModules, AddedModuleJoinsBothLists) {
  static Module extra("extra");
  const std::size_t before = server_modules().size();
  const std::size_t conf_before = server_conf_modules().modules().size();
  ServerModule m{"extra", &extra};
  add_server_module(m);
  ASSERT_EQ(server_modules().size(), before + 1);
  EXPECT_STREQ(server_modules().back().name, "extra");
  ASSERT_EQ(server_conf_modules().modules().size(), conf_before + 1);
  EXPECT_EQ(server_conf_modules().modules().back(), &extra);
  // A module with hooks only does not enter the conf registry.
  add_server_module(ServerModule{"hooks-only"});
  EXPECT_EQ(server_conf_modules().modules().size(), conf_before + 1);
}

TEST(ServerModules, LoadOptionsCarryTheEmbeddedConfiguration) {
  ConfLoadOptions o = server_load_options();
  EXPECT_EQ(o.modules, &server_conf_modules());
  EXPECT_EQ(o.embedded_text, kEmbeddedConf);
  EXPECT_FALSE(kEmbeddedConf.empty());
  ASSERT_EQ(o.embedded_includes.size(), 1u);
  EXPECT_EQ(o.embedded_includes[0].first, "mime.types");
  // Core's own default knows no embedded text and no module but core.
  ConfLoadOptions bare;
  EXPECT_TRUE(bare.embedded_text.empty());
  EXPECT_EQ(bare.modules, nullptr);
}

// Every layer's totals, then the event layer's per-worker figures: each
// name once, as Prometheus would have it, and every counter of a block shown.
TEST(ServerModules, CounterBlocksShowEveryCounterUnderAUniqueName) {
  struct Figure {
    std::string name, type, help;
  };
  std::vector<Figure> all;
  for (const CounterBlock* block : server_counter_blocks()) {
    EXPECT_EQ(block->figures().size() * sizeof(SharedCounter), block->size())
        << "a counter /metrics does not show, in the block of " << block->figures()[0].metric;
    std::set<std::size_t> offsets;
    for (const CounterFigure& f : block->figures()) {
      all.push_back({f.metric, f.type, f.help});
      EXPECT_TRUE(offsets.insert(f.offset).second) << "two figures on one counter: " << f.metric;
      EXPECT_EQ(f.offset % sizeof(SharedCounter), 0u) << f.metric;
      EXPECT_LT(f.offset, block->size()) << f.metric;
    }
  }
  EXPECT_EQ(server_counter_blocks()[0], &shared_counter_block()) << "connections first";
#define COLLECT(member, name, type, help) all.push_back({name, type, help});
  VIGIL_WORKER_STATS(COLLECT, COLLECT, COLLECT)
#undef COLLECT
  std::set<std::string> names;
  // Prometheus' names ([a-zA-Z_:][a-zA-Z0-9_:]*), ours lower case.
  const std::regex valid("vigil_[a-z0-9_]+");
  for (const Figure& f : all) {
    EXPECT_TRUE(std::regex_match(f.name, valid)) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << "twice: " << f.name;
    EXPECT_TRUE(f.type == "counter" || f.type == "gauge") << f.name;
    EXPECT_EQ(f.type == "counter", f.name.ends_with("_total")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
  EXPECT_GE(all.size(), 34u) << "17 totals and 17 per-worker figures at least";
}

}  // namespace
}  // namespace vigil
