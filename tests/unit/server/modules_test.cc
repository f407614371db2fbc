// The one module registry: what the server is built with, in load order, and
// the rule that lets layers claim context bits on their own — no two modules
// open blocks of the same context.
#include "server/modules.h"

#include <gtest/gtest.h>

#include <string>

#include "core/core_module.h"
#include "event/event_conf.h"
#include "http/core/conf.h"
#include "stream/stream_conf.h"

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

}  // namespace
}  // namespace vigil
