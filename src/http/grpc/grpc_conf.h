#pragma once
// The grpc module (nginx's ngx_http_grpc_module) and its configuration
// (ngx_http_grpc_loc_conf_t), with nginx's defaults: no response buffering,
// the request body streamed as it arrives, one page for the response head.
// The settings every upstream protocol has (timeouts, next upstream, hidden
// fields, bind, TLS) are the core's, under the "grpc" prefix
// (upstream_directives.cc, tls_conf.cc).

#include <string>
#include <vector>

#include "http/core/variables.h"
#include "http/proxy/proxy_conf.h"
#include "http/upstream/upstream_conf.h"

namespace vigil::http {

class HttpModule;
struct HttpLocConf;

struct GrpcConf : UpstreamConf {
  GrpcConf() {
    buffering = false;
    request_buffering = false;
  }
  // grpc_pass [grpc://|grpcs://]address|upstream-name
  bool enabled = false;
  std::string pass;  // as written
  std::string where;  // " in F:L" of grpc_pass
  // The :authority of a request: the grpc_pass host (its port when one is
  // written), unless grpc_set_header names Host.
  std::string host;
  // grpc_set_header: nginx's defaults merged in (an empty value: the
  // client's field of that name is not passed). One for Host (host_set)
  // goes as a "host" field, and no :authority is sent (nginx).
  std::vector<ProxyHeader> set_headers;
  bool host_set = false;
  // grpc_pass with variables: the URL is evaluated per request (grpc.cc)
  // and names an upstream block, an address, or a name to resolve.
  bool variables = false;
  VarTemplate url;
  upstream::GroupSet* groups = nullptr;  // the http block's upstream blocks
};

const HttpModule& grpc_module();
const GrpcConf& grpc_conf(const HttpLocConf& loc);

}  // namespace vigil::http
