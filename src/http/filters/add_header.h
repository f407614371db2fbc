#pragma once
// `add_header name value [always];` and `add_trailer name value [always];`
// (nginx's ngx_http_headers_filter_module; expires is filters/expires.cc):
// fields added to the responses of a location: its static files, redirects,
// error pages, `return`, and proxied responses; trailer fields after a
// chunked body's last chunk (filters/chunked.cc writes them).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/core/variables.h"

namespace vigil::http {

class HttpModule;
struct HttpLocConf;
struct Request;

struct AddHeader {
  // The fields a response has one of (add_header only): the value replaces
  // the server's own (an empty one removes it), the last of a name wins.
  enum class Sets : std::uint8_t { kNone, kEtag, kLastModified };
  std::string name;
  VarTemplate value;
  bool always = false;  // every status, not only the successes and redirects
  Sets sets = Sets::kNone;
};

struct AddHeaderList {
  std::vector<AddHeader> headers;
};

// The module's conf at every http level: a level without add_header of its
// own shares its parent's list.
struct AddHeaderConf {
  std::shared_ptr<const AddHeaderList> list;      // null: none
  std::shared_ptr<const AddHeaderList> trailers;  // add_trailer's; null: none
};

const HttpModule& add_header_module();
// The fields add_header adds to the responses of `loc` (null: none).
const AddHeaderList* add_header_list(const HttpLocConf& loc);

// add_trailer's fields for the responses of `loc` (null: none).
const AddHeaderList* add_trailer_list(const HttpLocConf& loc);
// The statuses nginx's headers filter (add_header, add_trailer, expires)
// applies to without `always`: 200, 201, 204, 206, 301-304, 307, 308.
bool success_or_redirect(int status);
// The field applies to a response of `status`.
bool adds_for(const AddHeader& h, int status);
// The fields of `list` that apply to `status` set `what`: the server's own
// field of that name is not sent.
bool add_headers_set(const AddHeaderList* list, int status, AddHeader::Sets what);

// Upper bound of the bytes write_add_headers writes for a response of `status`.
std::size_t add_headers_length(const Request& r, const AddHeaderList* list, int status);
// Writes the fields of `list` (null: none) that apply to `status` at `p`
// ("Name: value\r\n" each; a field whose value is empty is left out);
// returns the new end.
char* write_add_headers(const Request& r, const AddHeaderList* list, int status, char* p);

class HttpServers;
// Some location of the configuration adds fields or trailer fields: the
// add_header filter belongs in its header filter chain (modules.cc).
bool uses_add_header(const HttpServers& servers);

}  // namespace vigil::http
