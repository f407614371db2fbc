// Feeds arbitrary bytes to the configuration parser: first the grammar alone
// (parse_conf_tree), then a full load through the built-in modules with the
// bytes as the configuration text. Neither may crash, leak, hang or accept a
// configuration whose values break the documented invariants.
//
// File access is kept out: the prefix does not exist (so the "embedded" text
// - our input - is what gets loaded) and include is disabled. An input that
// starts with "-g" uses its first line as -g text.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/conf/loader.h"
#include "core/conf/tree.h"
#include "core/core_module.h"
#include "event/event_conf.h"
#include "fuzz_check.h"
#include "http/core/servers.h"
#include "server/modules.h"
#include "upstream/group.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // `upstream { server NAME; }` resolves names at load time: no DNS for fuzz input.
  vigil::upstream::set_numeric_hosts_only(true);
  std::string_view text(reinterpret_cast<const char*>(data), size);

  vigil::ConfLoadOptions options;
  options.modules = &vigil::server_conf_modules();
  options.prefix = "/nonexistent-vigil-fuzz-prefix";
  options.allow_include = false;
  if (text.substr(0, 2) == "-g") {
    auto nl = text.find('\n');
    bool one_line = nl == std::string_view::npos;
    options.extra_directives = std::string(text.substr(2, one_line ? nl : nl - 2));
    text = one_line ? std::string_view() : text.substr(nl + 1);
  }

  auto tree = vigil::parse_conf_tree(text, "fuzz.conf");
  if (!tree) check(!tree.status().message().empty(), "error without message");
  options.embedded_text = text;

  auto conf = vigil::Configuration::load(options);
  if (!conf) {
    check(!conf.status().message().empty(), "error without message");
    return 0;
  }
  const vigil::CoreConf& core = (*conf)->core();
  const vigil::EventConf& ev = vigil::event_conf(**conf);
  check(core.worker_processes >= 1, "worker_processes >= 1");
  check(!core.pid_path.empty(), "pid path set");
  check(!core.error_log.empty(), "error_log set");
  check(ev.connections >= 1, "worker_connections >= 1");
  check(ev.epoll_events >= 1, "epoll_events >= 1");
  check(ev.use.empty() || ev.use == "epoll" || ev.use == "poll" || ev.use == "select" ||
            ev.use == "io_uring",
        "use is a known method");
  if (const vigil::http::HttpServers* http = vigil::http::http_servers(**conf)) {
    for (std::size_t i = 0; i < http->file_caches.size(); ++i) {
      check(http->file_caches[i]->max >= 1, "open_file_cache max >= 1");
      check(http->file_caches[i]->index == static_cast<int>(i), "open_file_cache table index");
    }
  }
  check((*conf)->used_embedded(), "loaded the input, not a file");
  check(tree.is_ok(), "a loadable text is grammatical");
  std::string dump = (*conf)->dump();
  check(dump.size() >= text.size(), "dump holds the text");
  return 0;
}
