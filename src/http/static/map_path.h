#pragma once
// A URI's file name under a location's root or alias (nginx's
// ngx_http_map_uri_to_path): root + URI; with alias, the alias in place of
// the part of the URI the location's name matched (all of it for a regular
// expression location, whose alias names the file with captures). A root
// or alias with variables is evaluated for the request, and taken relative
// to the prefix when relative.

#include <cstddef>
#include <string_view>

namespace vigil::http {

struct Request;
struct HttpLocConf;

// Writes the document root (the root or alias itself, evaluated) to `out`
// (`cap` bytes); returns its length, or npos when it does not fit.
std::size_t document_root(const Request& r, const HttpLocConf& loc, char* out, std::size_t cap);

// Writes the file name for `uri` to `out` (`cap` bytes, NUL-terminated);
// returns its length, or npos when it does not fit.
std::size_t map_uri_to_path(const Request& r, const HttpLocConf& loc, std::string_view uri,
                            char* out, std::size_t cap);

}  // namespace vigil::http
