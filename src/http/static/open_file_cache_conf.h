#pragma once
// The open_file_cache directives' module and its conf at every http level
// (open_file_cache_conf.cc); the tables themselves are open_file_cache.h's.

#include <cstdint>
#include <memory>

#include "vigil/core/clock.h"

namespace vigil::http {

class HttpModule;
struct HttpLocConf;

// open_file_cache max=N [inactive=time]: one per directive; locations that
// inherit it share it, and each worker builds its own table for it (`index`
// into HttpServers::file_caches).
struct OpenFileCacheConf {
  std::uint32_t max = 0;
  Msec inactive = 60000;
  mutable int index = -1;  // set once the http block is finished
};

// What a location uses: its cache and the rules of a lookup.
struct OpenFileCacheLocConf {
  std::shared_ptr<const OpenFileCacheConf> cache;  // null: off
  std::uint32_t valid = 60;                        // seconds
  std::uint32_t min_uses = 1;
  bool errors = false;
};

const HttpModule& open_file_cache_module();
// The open_file_cache settings of a location (or of a server's level).
const OpenFileCacheLocConf& open_file_cache_conf(const HttpLocConf& loc);

}  // namespace vigil::http
