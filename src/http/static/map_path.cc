#include "http/static/map_path.h"

#include <cstring>
#include <string>

#include "http/core/conf.h"
#include "http/core/request.h"

namespace vigil::http {

std::size_t document_root(const Request& r, const HttpLocConf& loc, char* out, std::size_t cap) {
  if (loc.root_vars == nullptr) {
    if (loc.root_path.size() > cap) return std::string::npos;
    std::memcpy(out, loc.root_path.data(), loc.root_path.size());
    return loc.root_path.size();
  }
  const VarTemplate& t = *loc.root_vars;
  const std::string& prefix = loc.root_prefix;
  const std::size_t n = t.length(r);
  if (prefix.size() + 1 + n > cap) return std::string::npos;
  std::size_t len = static_cast<std::size_t>(t.write(r, out) - out);
  if (!prefix.empty() && (len == 0 || out[0] != '/')) {
    // Relative: under the prefix, as the literal root's join_conf_path does.
    const bool slash = prefix.back() == '/';
    const std::size_t shift = prefix.size() + (slash ? 0 : 1);
    std::memmove(out + shift, out, len);
    std::memcpy(out, prefix.data(), prefix.size());
    if (!slash) out[prefix.size()] = '/';
    len += shift;
  }
  return len;
}

std::size_t map_uri_to_path(const Request& r, const HttpLocConf& loc, std::string_view uri,
                            char* out, std::size_t cap) {
  if (cap == 0) return std::string::npos;
  std::size_t len = document_root(r, loc, out, cap - 1);
  if (len == std::string::npos) return len;
  std::string_view rest = uri;
  if (loc.alias) {
    if (loc.alias_len != std::string::npos) {
      rest = uri.substr(std::min(loc.alias_len, uri.size()));
    } else if (!r.add_uri_to_alias) {
      rest = {};
    }
  }
  if (len + rest.size() + 1 > cap) return std::string::npos;
  if (!rest.empty()) std::memcpy(out + len, rest.data(), rest.size());
  len += rest.size();
  out[len] = '\0';
  return len;
}

}  // namespace vigil::http
