#pragma once
// `add_header name value [always];` (nginx's ngx_http_headers_filter_module,
// add_header only): fields added to the responses of a location: its static
// files, redirects, error pages, `return`, and proxied responses.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "http/core/variables.h"

namespace vigil::http {

class HttpModule;
struct HttpLocConf;
struct Request;

struct AddHeader {
  std::string name;
  VarTemplate value;
  bool always = false;         // every status, not only the successes and redirects
  bool last_modified = false;  // "Last-Modified": replaces the server's (add_header_filter)
};

struct AddHeaderList {
  std::vector<AddHeader> headers;
};

// The module's conf at every http level: a level without add_header of its
// own shares its parent's list.
struct AddHeaderConf {
  std::shared_ptr<const AddHeaderList> list;  // null: none
};

const HttpModule& add_header_module();
// The fields add_header adds to the responses of `loc` (null: none).
const AddHeaderList* add_header_list(const HttpLocConf& loc);

// Upper bound of the bytes write_add_headers writes for a response of `status`.
std::size_t add_headers_length(const Request& r, const AddHeaderList* list, int status);
// Writes the fields of `list` (null: none) that apply to `status` at `p`
// ("Name: value\r\n" each; a field whose value is empty is left out);
// returns the new end.
char* write_add_headers(const Request& r, const AddHeaderList* list, int status, char* p);

class HttpServers;
// Some location of the configuration adds fields: the add_header filter
// belongs in its header filter chain (modules.cc).
bool uses_add_header(const HttpServers& servers);

}  // namespace vigil::http
