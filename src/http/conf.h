#pragma once
// The http { server { location { } } } configuration (nginx's
// ngx_http_core_module main/srv/loc confs): what each level keeps, with
// nginx's defaults. After a successful load every loc conf has its final,
// merged values; HttpServers (servers.h), built once the whole http block is
// merged, is the read-only view the workers use.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "event/listen_conf.h"
#include "http/types.h"
#include "vigil/core/clock.h"

namespace vigil {
// The http block's contexts (core knows only the main context).
inline constexpr ConfContextMask kHttpMainConf = 1u << 2;
inline constexpr ConfContextMask kHttpSrvConf = 1u << 3;
inline constexpr ConfContextMask kHttpLocConf = 1u << 4;
inline constexpr ConfContextMask kHttpUpsConf = 1u << 5;
}  // namespace vigil

namespace vigil::http {

class HttpServers;

// One "listen" directive.
using ListenConf = ListenArgs;  // event/listen_conf.h

enum class LocationHandler : std::uint8_t { kStatic, kStubStatus, kMetrics };

// lingering_close off | on | always
enum class Lingering : std::uint8_t { kOff, kOn, kAlways };

// if_modified_since off | exact | before
enum class IfModifiedSince : std::uint8_t { kOff, kExact, kBefore };

struct AccessLogConf {
  bool off = false;
  std::string path;            // resolved against the prefix
  std::size_t buffer = 65536;  // bytes gathered before a write(2)
  Msec flush = 1000;           // longest a line waits in the buffer
};

struct ErrorPage {
  int status = 0;
  int overwrite = 0;  // "=code": answer with this status instead; 0 keeps the original
  std::string uri;
};

struct HttpLocConf {
  // The location itself (empty name for the server level).
  std::string name;
  bool exact = false;    // "location = /x"
  bool noregex = false;  // "location ^~ /x" (same as a plain prefix: we have no regex)
  std::string where;

  std::string root = "html";  // relative to the prefix; resolved in `root_path`
  std::string root_path;
  std::vector<std::string> index;  // default {"index.html"}
  bool sendfile = false;
  bool tcp_nopush = false;
  bool tcp_nodelay = true;
  Msec keepalive_timeout = 75000;
  Msec keepalive_header = 0;  // "Keep-Alive: timeout=N" when set (second argument)
  std::uint64_t keepalive_requests = 1000;
  std::size_t client_max_body_size = 1024 * 1024;  // 0: no limit
  Msec client_body_timeout = 60000;
  Msec send_timeout = 60000;
  std::shared_ptr<const TypesMap> types;  // null: the built-in map
  std::string default_type = "text/plain";
  std::shared_ptr<const AccessLogConf> access_log;
  int access_log_index = -1;  // into HttpServers::access_logs; -1: off
  std::vector<ErrorPage> error_pages;
  LocationHandler handler = LocationHandler::kStatic;
  Lingering lingering_close = Lingering::kOn;
  Msec lingering_time = 30000;
  Msec lingering_timeout = 5000;
  IfModifiedSince if_modified_since = IfModifiedSince::kExact;
  std::size_t output_buffer = 32768;  // read/write chunk when sendfile is off

  // Nested locations, filled when the http block is finished.
  std::vector<HttpLocConf*> exact_locations;
  std::vector<HttpLocConf*> prefix_locations;  // longest name first

  const ErrorPage* find_error_page(int status) const {
    for (const auto& p : error_pages) {
      if (p.status == status) return &p;
    }
    return nullptr;
  }
};

struct HttpSrvConf {
  std::vector<ListenConf> listens;
  std::vector<std::string> server_names;  // lower case
  Msec client_header_timeout = 60000;
  std::size_t client_header_buffer_size = 1024;
  std::uint32_t large_buffers_num = 4;
  std::size_t large_buffers_size = 8192;
  std::string where;

  HttpLocConf* loc = nullptr;  // the server-level loc conf
};

// The last conf spec of the module, kept in the http scope only: its init
// runs after the main, srv and loc confs of the whole block are merged (the
// loader finishes specs in order), which is where nginx's
// ngx_http_optimize_servers would run. It owns the built server tables.
struct HttpFinalConf {
  std::shared_ptr<HttpServers> servers;
};

const Module& http_module();

// The built tables of a loaded configuration, or null when it has no http block.
const HttpServers* http_servers(const Configuration& conf);

// Largest number of large_client_header_buffers a request may use.
inline constexpr std::uint32_t kMaxLargeBuffers = 64;

}  // namespace vigil::http
