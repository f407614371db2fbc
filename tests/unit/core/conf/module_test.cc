// Tests the module/directive registry (src/core/conf/module.cc, scope.cc and
// the loader's scope handling) with toy modules shaped like the HTTP module
// to come: nested contexts with per-level confs, inheritance and merge_conf,
// a block that parses its own free-form content, and slot helpers.

#include "core/conf/module.h"

#include <gtest/gtest.h>

#include <map>

#include "conf_test_util.h"

namespace vigil {
namespace {

using testing::ConfDirTest;

// Contexts of the toy: "web { site { page { } } }", claimed from bits 16+.
constexpr ConfContextMask kWebConf = 1u << 16;
constexpr ConfContextMask kSiteConf = 1u << 17;
constexpr ConfContextMask kPageConf = 1u << 18;

struct WebMainConf {
  std::size_t buckets = 0;
  int init_calls = 0;
};

struct PageConf {  // nginx's loc_conf: exists at every level, merged downwards
  bool gzip = false;
  Msec timeout = 0;
  std::string root;
  std::size_t buffer = 0;
  std::int64_t expires = 0;
  int level = 0;
  std::vector<std::string> tags;  // custom: accumulates, merged by merge_conf
  int merges = 0;
};

struct SiteConf {
  std::string name;
  std::map<std::string, std::string> types;
};

Status set_tag(const DirectiveCall& call, PageConf& conf) {
  for (std::size_t i = 0; i < call.arg_count(); ++i) conf.tags.push_back(call.arg(i));
  return Status::ok();
}

// A "types { text/html html htm; }" block: its lines are data, not directives.
class TypesSink : public StatementSink {
 public:
  explicit TypesSink(SiteConf& conf) : conf_(conf) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    if (st.end != ConfTerminator::kSemicolon || st.words.size() < 2) {
      return Status::error("bad types line" + parser.origin().where(st.words[0].line));
    }
    for (std::size_t i = 1; i < st.words.size(); ++i)
      conf_.types[st.words[i].text] = st.words[0].text;
    return Status::ok();
  }

 private:
  SiteConf& conf_;
};

const Module& web_module() {
  static const Module* m = [] {
    auto* mod = new Module("web");
    auto main = mod->add_conf<WebMainConf>(kWebConf, [](const ConfInit& ctx, WebMainConf& c) {
      ++c.init_calls;
      if (c.buckets == 3) return ctx.error("buckets", "three buckets is unlucky");
      return Status::ok();
    });
    auto site = mod->add_conf<SiteConf>(kWebConf | kSiteConf);
    auto page = mod->add_conf<PageConf>(
        kWebConf | kSiteConf | kPageConf,
        [](const ConfInit&, PageConf& c) {
          c.level = 1;
          return Status::ok();
        },
        [](const ConfInit&, const PageConf& parent, PageConf& child) {
          child.tags.insert(child.tags.begin(), parent.tags.begin(), parent.tags.end());
          child.level = parent.level + 1;
          ++child.merges;
          return Status::ok();
        });
    mod->add_block("web", kMainConf, Arity::none(), kWebConf);
    mod->add_block("site", kWebConf, Arity::between(0, 1), kSiteConf).multiple = true;
    mod->add_block("page", kSiteConf | kPageConf, Arity::exactly(1), kPageConf).multiple = true;
    mod->add("buckets", kWebConf, Arity::exactly(1), main.size(&WebMainConf::buckets, 64));
    mod->add("name", kSiteConf, Arity::exactly(1), site.string(&SiteConf::name, "default"));
    mod->add_block("types", kSiteConf, Arity::none(), 0,
                   site.custom([](const DirectiveCall& call, SiteConf& c) {
                     TypesSink sink(c);
                     return call.parse_block(sink);
                   }));
    const ConfContextMask all = kWebConf | kSiteConf | kPageConf;
    mod->add("gzip", all, Arity::on_off(), page.flag(&PageConf::gzip, false));
    mod->add("timeout", all, Arity::exactly(1), page.msec(&PageConf::timeout, 60000));
    mod->add("root", all, Arity::exactly(1), page.string(&PageConf::root, "html"));
    mod->add("buffer", all, Arity::exactly(1), page.size(&PageConf::buffer, 4096, 1));
    mod->add("expires", all, Arity::exactly(1), page.sec(&PageConf::expires, std::int64_t{0}));
    mod->add("tag", all, Arity::one_or_more(), page.custom(set_tag)).multiple = true;
    // The same name as a main-context directive of another module below.
    mod->add("mode", kWebConf, Arity::exactly(1),
             DirectiveBody::handler([](const DirectiveCall&) { return Status::ok(); }));
    return mod;
  }();
  return *m;
}

struct ToyMainConf {
  std::string mode;
};

const Module& toy_main_module() {
  static const Module* m = [] {
    auto* mod = new Module("toy");
    auto c = mod->add_conf<ToyMainConf>(kMainConf);
    mod->add("mode", kMainConf, Arity::exactly(1),
             c.one_of<std::string>(&ToyMainConf::mode, "F", {{"fast", "F"}, {"slow", "S"}}));
    mod->add("must", kMainConf, Arity::none(),
             DirectiveBody::handler([](const DirectiveCall&) { return Status::ok(); }))
        .required = true;
    return mod;
  }();
  return *m;
}

class ModuleTest : public ConfDirTest {
 protected:
  Result<std::unique_ptr<Configuration>> load_toy(std::string_view text) {
    write("conf/vigil.conf", text);
    ConfLoadOptions o = options();
    o.modules = &registry_;
    return Configuration::load(o);
  }
  std::string toy_error(std::string_view text) {
    auto r = load_toy(text);
    return r ? std::string("(loaded)") : r.status().message();
  }
  // The PageConf of a scope.
  const PageConf& page_of(const ConfScope& scope) {
    return *static_cast<const PageConf*>(scope.conf(0, 2));
  }

  ModuleRegistry registry_{&web_module(), &toy_main_module(), &core_module()};
};

TEST_F(ModuleTest, DefaultsInheritanceAndMerge) {
  auto r = load_toy(
      "must;\n"
      "web {\n"
      "  gzip on;\n"
      "  tag a;\n"
      "  site one {\n"
      "    timeout 5s;\n"
      "    page /x { root /srv/x; tag b c; }\n"
      "    page /y { gzip off; page /y/z { } }\n"
      "  }\n"
      "  site { name two; }\n"
      "  buffer 8k;\n"  // after the sites: still inherited, as in nginx
      "}\n");
  ASSERT_TRUE(r) << r.status().message();
  const ConfScope& web = *(*r)->main_scope().children().at(0);
  ASSERT_EQ(web.children().size(), 2u);
  const ConfScope& one = *web.children()[0];
  const ConfScope& two = *web.children()[1];
  EXPECT_EQ(one.args(), std::vector<std::string>{"one"});
  EXPECT_TRUE(two.args().empty());

  // The web level is the root of PageConf: defaults + init, no merge.
  const PageConf& w = page_of(web);
  EXPECT_TRUE(w.gzip);
  EXPECT_EQ(w.timeout, 60000u);
  EXPECT_EQ(w.root, "html");
  EXPECT_EQ(w.buffer, 8192u);
  EXPECT_EQ(w.level, 1);
  EXPECT_EQ(w.merges, 0);

  const PageConf& s1 = page_of(one);
  EXPECT_TRUE(s1.gzip);
  EXPECT_EQ(s1.timeout, 5000u);
  EXPECT_EQ(s1.buffer, 8192u);
  EXPECT_EQ(s1.level, 2);
  EXPECT_EQ(s1.tags, std::vector<std::string>{"a"});

  ASSERT_EQ(one.children().size(), 2u);
  const PageConf& x = page_of(*one.children()[0]);
  EXPECT_EQ(one.children()[0]->args(), std::vector<std::string>{"/x"});
  EXPECT_EQ(x.root, "/srv/x");
  EXPECT_TRUE(x.gzip);
  EXPECT_EQ(x.timeout, 5000u);
  EXPECT_EQ(x.level, 3);
  EXPECT_EQ(x.tags, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(x.merges, 1);

  const ConfScope& y = *one.children()[1];
  EXPECT_FALSE(page_of(y).gzip);
  ASSERT_EQ(y.children().size(), 1u);
  const PageConf& z = page_of(*y.children()[0]);
  EXPECT_FALSE(z.gzip);  // from /y, not from web
  EXPECT_EQ(z.timeout, 5000u);
  EXPECT_EQ(z.level, 4);

  const PageConf& s2 = page_of(two);
  EXPECT_TRUE(s2.gzip);
  EXPECT_EQ(s2.timeout, 60000u);
  EXPECT_EQ(s2.buffer, 8192u);

  // Per-level confs that are not merged: SiteConf root is web and each site.
  const auto& site_one = *static_cast<const SiteConf*>(one.conf(0, 1));
  // Not the root of SiteConf either: it inherits the web level's value (the default).
  EXPECT_EQ(site_one.name, "default");
  EXPECT_EQ(static_cast<const SiteConf*>(two.conf(0, 1))->name, "two");  // set: kept

  const WebMainConf& main = (*r)->get<WebMainConf>(web_module());
  EXPECT_EQ(main.buckets, 64u);
  EXPECT_EQ(main.init_calls, 1);
  EXPECT_EQ((*r)->get<ToyMainConf>(toy_main_module()).mode, "F");
  EXPECT_EQ((*r)->find<PageConf>(web_module(), 2), &w);  // breadth-first: the web level first
}

TEST_F(ModuleTest, CustomBlockParsesItsOwnContent) {
  auto r = load_toy("must; web { site { types {\n text/html html htm;\n image/png png;\n } } }");
  ASSERT_TRUE(r) << r.status().message();
  const ConfScope& site = *(*r)->main_scope().children().at(0)->children().at(0);
  const auto& conf = *static_cast<const SiteConf*>(site.conf(0, 1));
  EXPECT_EQ(conf.types.at("htm"), "text/html");
  EXPECT_EQ(conf.types.at("png"), "image/png");
  EXPECT_EQ(toy_error("must; web { site { types {\n text/html;\n } } }"),
            "bad types line in conf/vigil.conf:2");
}

TEST_F(ModuleTest, SameNameInDifferentContexts) {
  auto r = load_toy("must; mode slow; web { mode whatever; }");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->get<ToyMainConf>(toy_main_module()).mode, "S");
  EXPECT_EQ(toy_error("must; web { site { mode x; } }"),
            "\"mode\" directive is not allowed here in conf/vigil.conf:1");
  EXPECT_EQ(toy_error("must; mode medium;"),
            "invalid value \"medium\" in \"mode\" directive, it must be \"fast\" or \"slow\" in "
            "conf/vigil.conf:1");
}

TEST_F(ModuleTest, RequiredAndInitErrors) {
  EXPECT_EQ(toy_error("web { }"), "no \"must\" directive in configuration");
  EXPECT_EQ(toy_error("must; web {\n buckets 3;\n}"),
            "three buckets is unlucky in conf/vigil.conf:2");
}

TEST_F(ModuleTest, DuplicatesArePerScope) {
  // The same directive in sibling and nested scopes is fine...
  auto r =
      load_toy("must; web { gzip on; site { gzip off; } site { gzip on; page /a { gzip on; } } }");
  ASSERT_TRUE(r) << r.status().message();
  // ...twice in one scope is not; "multiple" directives may repeat.
  EXPECT_EQ(toy_error("must; web { site {\n gzip on;\n gzip off;\n } }"),
            "\"gzip\" directive is duplicate in conf/vigil.conf:3");
  EXPECT_TRUE(load_toy("must; web { tag a; tag b; site { } site { } }"));
}

TEST_F(ModuleTest, SlotValueErrors) {
  EXPECT_EQ(toy_error("must; web { buffer 0; }"),
            "invalid value \"0\" in \"buffer\" directive in conf/vigil.conf:1");
  EXPECT_EQ(toy_error("must; web { buffer 1x; }"),
            "invalid value \"1x\" in \"buffer\" directive in conf/vigil.conf:1");
  EXPECT_EQ(toy_error("must; web { expires 10ms; }"),
            "invalid value \"10ms\" in \"expires\" directive in conf/vigil.conf:1");
  auto r = load_toy("must; web { expires 1h; }");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(page_of(*(*r)->main_scope().children().at(0)).expires, 3600);
}

TEST(ModuleRegistry, Index) {
  ModuleRegistry reg{&web_module(), &toy_main_module()};
  EXPECT_EQ(reg.index_of(web_module()), 0u);
  EXPECT_EQ(reg.index_of(toy_main_module()), 1u);
  EXPECT_EQ(reg.index_of(core_module()), ModuleRegistry::npos);
}

TEST(Arity, Accepts) {
  EXPECT_TRUE(Arity::none().accepts(0));
  EXPECT_FALSE(Arity::none().accepts(1));
  EXPECT_TRUE(Arity::exactly(2).accepts(2));
  EXPECT_FALSE(Arity::exactly(2).accepts(1));
  EXPECT_FALSE(Arity::exactly(2).accepts(3));
  EXPECT_TRUE(Arity::between(1, 3).accepts(3));
  EXPECT_FALSE(Arity::between(1, 3).accepts(4));
  EXPECT_FALSE(Arity::one_or_more().accepts(0));
  EXPECT_TRUE(Arity::one_or_more().accepts(1000));
  EXPECT_FALSE(Arity::at_least(2).accepts(1));
  EXPECT_TRUE(Arity::on_off().accepts(1));
  EXPECT_FALSE(Arity::on_off().accepts(2));
}

TEST(JoinConfPath, Rules) {
  EXPECT_EQ(join_conf_path("", "conf/x"), "conf/x");
  EXPECT_EQ(join_conf_path("/p", "conf/x"), "/p/conf/x");
  EXPECT_EQ(join_conf_path("/p/", "conf/x"), "/p/conf/x");
  EXPECT_EQ(join_conf_path("/p", "/abs"), "/abs");
  EXPECT_EQ(join_conf_path("rel", "x"), "rel/x");
}

}  // namespace
}  // namespace vigil
