#include "server/build_info.h"

#include <openssl/crypto.h>
#include <openssl/opensslv.h>

#include <string_view>

#include "event/event_conf.h"
#include "http/core/conf.h"
#include "mail/mail_conf.h"
#include "stream/stream_conf.h"
#include "vigil/event/backend.h"
#include "vigil/version.h"

namespace vigil {

namespace {

constexpr ConfContextMask kHttp = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
constexpr ConfContextMask kStream = kStreamMainConf | kStreamSrvConf;
constexpr ConfContextMask kMail = kMailMainConf | kMailSrvConf;

// One of nginx's modules: its configure name, whether nginx builds it without
// being asked, and the directive (in the contexts given) whose presence means
// Vigil has it.
struct NginxModule {
  std::string_view name;
  bool default_built;
  std::string_view directive;
  ConfContextMask contexts;
};

constexpr NginxModule kNginxModules[] = {
    // Built only when asked for.
    {"http_ssl_module", false, "ssl_certificate", kHttp},
    {"http_v2_module", false, "http2_max_concurrent_streams", kHttp},
    {"http_realip_module", false, "set_real_ip_from", kHttp},
    {"http_addition_module", false, "add_before_body", kHttp},
    {"http_sub_module", false, "sub_filter", kHttp},
    {"http_dav_module", false, "dav_methods", kHttp},
    {"http_flv_module", false, "flv", kHttpLocConf},
    {"http_mp4_module", false, "mp4", kHttpLocConf},
    {"http_gunzip_module", false, "gunzip", kHttp},
    {"http_gzip_static_module", false, "gzip_static", kHttp},
    {"http_auth_request_module", false, "auth_request", kHttp},
    {"http_random_index_module", false, "random_index", kHttpLocConf},
    {"http_secure_link_module", false, "secure_link", kHttp},
    {"http_slice_module", false, "slice", kHttp},
    {"http_stub_status_module", false, "stub_status", kHttp},
    {"stream", false, "stream", kMainConf},
    {"stream_ssl_module", false, "ssl_certificate", kStream},
    {"stream_realip_module", false, "set_real_ip_from", kStream},
    {"stream_ssl_preread_module", false, "ssl_preread", kStream},
    {"mail", false, "mail", kMainConf},
    {"mail_ssl_module", false, "ssl_certificate", kMail},
    // Built unless declined.
    {"http_charset_module", true, "charset", kHttp},
    {"http_gzip_module", true, "gzip", kHttp},
    {"http_ssi_module", true, "ssi", kHttp},
    {"http_userid_module", true, "userid", kHttp},
    {"http_access_module", true, "allow", kHttp},
    {"http_auth_basic_module", true, "auth_basic", kHttp},
    {"http_mirror_module", true, "mirror", kHttp},
    {"http_autoindex_module", true, "autoindex", kHttp},
    {"http_geo_module", true, "geo", kHttpMainConf},
    {"http_map_module", true, "map", kHttpMainConf},
    {"http_split_clients_module", true, "split_clients", kHttpMainConf},
    {"http_referer_module", true, "valid_referers", kHttp},
    {"http_rewrite_module", true, "return", kHttp},
    {"http_proxy_module", true, "proxy_pass", kHttp},
    {"http_fastcgi_module", true, "fastcgi_pass", kHttp},
    {"http_uwsgi_module", true, "uwsgi_pass", kHttp},
    {"http_scgi_module", true, "scgi_pass", kHttp},
    {"http_grpc_module", true, "grpc_pass", kHttp},
    {"http_memcached_module", true, "memcached_pass", kHttp},
    {"http_limit_conn_module", true, "limit_conn", kHttp},
    {"http_limit_req_module", true, "limit_req", kHttp},
    {"http_empty_gif_module", true, "empty_gif", kHttpLocConf},
    {"http_browser_module", true, "modern_browser", kHttp},
    {"http_upstream_hash_module", true, "hash", kHttpUpsConf},
    {"http_upstream_ip_hash_module", true, "ip_hash", kHttpUpsConf},
    {"http_upstream_least_conn_module", true, "least_conn", kHttpUpsConf},
    {"http_upstream_random_module", true, "random", kHttpUpsConf},
    {"http_upstream_keepalive_module", true, "keepalive", kHttpUpsConf},
    {"http_upstream_zone_module", true, "zone", kHttpUpsConf},
    {"http-cache", true, "proxy_cache", kHttp},
    {"stream_limit_conn_module", true, "limit_conn", kStream},
    {"stream_access_module", true, "allow", kStream},
    {"stream_geo_module", true, "geo", kStreamMainConf},
    {"stream_map_module", true, "map", kStreamMainConf},
    {"stream_split_clients_module", true, "split_clients", kStreamMainConf},
    {"stream_return_module", true, "return", kStreamSrvConf},
    {"stream_set_module", true, "set", kStream},
    {"stream_pass_module", true, "pass", kStreamSrvConf},
    {"stream_upstream_hash_module", true, "hash", kStreamUpsConf},
    {"stream_upstream_least_conn_module", true, "least_conn", kStreamUpsConf},
    {"stream_upstream_random_module", true, "random", kStreamUpsConf},
    {"stream_upstream_zone_module", true, "zone", kStreamUpsConf},
    {"mail_pop3_module", true, "pop3_auth", kMail},
    {"mail_imap_module", true, "imap_auth", kMail},
    {"mail_smtp_module", true, "smtp_auth", kMail},
};

bool has_directive(const ModuleRegistry& modules, std::string_view name, ConfContextMask where) {
  for (const Module* m : modules.modules()) {
    for (const Directive& d : m->directives()) {
      if (d.name == name && (d.contexts & where) != 0) return true;
    }
  }
  return false;
}

}  // namespace

std::string nginx_configure_arguments(const ModuleRegistry& modules) {
  std::string out;
  for (const NginxModule& m : kNginxModules) {
    const bool has = has_directive(modules, m.directive, m.contexts);
    if (has == m.default_built) continue;
    if (!out.empty()) out += ' ';
    out += has ? "--with-" : "--without-";
    out += m.name;
  }
  // Regular expressions (locations, server names) come with PCRE in nginx.
  if (!has_directive(modules, "rewrite", kHttp)) out += " --without-pcre";
  return out;
}

std::string build_description(const ModuleRegistry& modules) {
  std::string out;
  out += "vigil version: vigil/" VIGIL_VERSION_STRING "\n";
  out += "nginx version: nginx/";
  out += kNginxCompatibleVersion;
  out += "\n";
#if defined(__clang__)
  out += "built by clang " __clang_version__ "\n";
#elif defined(__GNUC__)
  out += "built by gcc " __VERSION__ "\n";
#endif
  out += "built with " OPENSSL_VERSION_TEXT " (running with ";
  out += OpenSSL_version(OPENSSL_VERSION);
  out += ")\nTLS SNI support enabled\n";
  out += "configure arguments: " + nginx_configure_arguments(modules) + "\n";
  out += "event backends: ";
  bool first = true;
  for (auto name : backend_names()) {
    if (!first) out += ", ";
    out += name;
    first = false;
  }
  out += "\n";
  return out;
}

}  // namespace vigil
