#pragma once
// The charset filter (nginx's ngx_http_charset_filter_module): names the
// response's charset in Content-Type, and recodes a body from one charset to
// another through the tables charset_map declares.
//
//   charset name | $var | off      the charset the client is sent
//   source_charset name | $var     the charset the body is in (else its
//                                  Content-Type's charset= parameter)
//   override_charset on | off      a response that names its charset (a
//                                  proxied one) is recoded too
//   charset_types mime... | *      which types get the parameter
//   charset_map a b { XX YY; }     a table (http level): bytes of `a` to
//                                  bytes of `b`, or to UTF-8 when `b` is
//                                  utf-8 ("XX HHHH", the UTF-8 bytes)
//
// A table works both ways. Bytes below 0x80 are kept; a byte the table does
// not map becomes '?'; a UTF-8 character the table cannot write becomes the
// HTML entity "&#N;", and an invalid UTF-8 sequence '?'. A recoded response
// is sent whole (no ranges); recoding to or from UTF-8 changes the length,
// so the response goes without Content-Length. A coded body
// (Content-Encoding) is never recoded.
//
// Memory: the request's context and its output buffers come from the
// worker's buffer cache and go back when the request ends (release_charset).

#include <string_view>

namespace vigil {
struct Chain;
}

namespace vigil::http {

class BodyFilterNext;
class HttpModule;
class HttpServers;
struct Request;

const HttpModule& charset_module();
// Some location of the configuration sets `charset`: the filters join the chains.
bool uses_charset(const HttpServers& servers);
// The charset a response of `type` (no parameters) to r is labelled with
// is UTF-8 (autoindex counts characters then, as nginx).
bool charset_is_utf8(const Request& r, std::string_view type);
// Gives back what a request's recoding holds (free_request).
void release_charset(Request& r);

// The filters (modules.cc puts them before gzip's: a body is recoded, then
// compressed).
int charset_header_filter(Request& r);
int charset_body_filter(Request& r, Chain* in, BodyFilterNext next);

}  // namespace vigil::http
