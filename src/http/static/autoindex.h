#pragma once
// autoindex (nginx's ngx_http_autoindex_module): directory listings for a
// URI ending in '/' when no index file answered (autoindex.cc).

#include <string_view>

namespace vigil::http {

struct Request;
struct HttpLocConf;
class HttpModule;

const HttpModule& autoindex_module();
// autoindex on in `loc`.
bool autoindex_enabled(const HttpLocConf& loc);
// Answers r with the listing of the directory `dir_path` (NUL-terminated),
// titled `uri`: 0 once the response is under way, else a status (404, 403,
// 500; 400 for a bad jsonp callback).
int autoindex_handler(Request& r, const char* dir_path, std::string_view uri);

}  // namespace vigil::http
