// auth_basic / auth_basic_user_file (nginx's ngx_http_auth_basic_module).
//
// The user file is opened and read for every request that brings
// credentials, as nginx does, so that an edited file takes effect at once;
// it is read in pieces through a fixed buffer and scanned for the user's
// line (HtpasswdScanner), so a file of any size costs the same small amount
// of memory. Its name may hold variables; a relative name is taken from the
// directory of the main configuration file (nginx's conf prefix).
//
// Answers, as nginx's: no or malformed credentials, an unknown user or a
// wrong password are 401 with "WWW-Authenticate: Basic realm=..."; a user
// file that does not exist is 403, one that cannot be opened or read 500.
#include "http/access/auth_basic.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec/tokens.h"
#include "http/access/htpasswd.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

struct AuthBasicConf {
  // auth_basic: off when `realm` is empty (never set, or "off").
  bool on = false;
  VarTemplate realm;
  std::string header;  // "Basic realm=\"...\"" for a realm without variables
  // auth_basic_user_file: a literal name resolved at load time, or a
  // template evaluated per request and resolved against conf_prefix.
  bool has_file = false;
  VarTemplate user_file;
  std::string user_file_path;
  std::string conf_prefix;
};

Status set_realm(const DirectiveCall& call, AuthBasicConf& conf) {
  conf.realm = VarTemplate{};
  conf.header.clear();
  conf.on = call.arg(0) != "off";
  if (!conf.on) return Status::ok();
  auto t = VarTemplate::compile(call.arg(0));
  if (!t) return call.error(t.status().message());
  conf.realm = std::move(t.value());
  if (conf.realm.is_literal()) conf.header = "Basic realm=\"" + call.arg(0) + "\"";
  return Status::ok();
}

Status set_user_file(const DirectiveCall& call, AuthBasicConf& conf) {
  auto t = VarTemplate::compile(call.arg(0));
  if (!t) return call.error(t.status().message());
  conf.user_file = std::move(t.value());
  conf.has_file = true;
  conf.conf_prefix = call.env().conf_prefixed("");
  if (conf.user_file.is_literal()) conf.user_file_path = call.env().conf_prefixed(call.arg(0));
  return Status::ok();
}

// 401 with the realm in WWW-Authenticate (kept for the error page).
int unauthorized(Request& r, const AuthBasicConf& conf, std::string_view realm) {
  if (!conf.header.empty()) {
    r.headers_out.www_authenticate = conf.header;
    return 401;
  }
  static constexpr std::string_view kHead = "Basic realm=\"";
  BufferCache& cache = r.hc->worker->buffers();
  char* mem = cache.reserve(r.auth_mem, r.auth_mem_size, kHead.size() + realm.size() + 1);
  if (mem == nullptr) return 500;
  std::memcpy(mem, kHead.data(), kHead.size());
  std::memcpy(mem + kHead.size(), realm.data(), realm.size());
  mem[kHead.size() + realm.size()] = '"';
  r.headers_out.www_authenticate = std::string_view(mem, kHead.size() + realm.size() + 1);
  return 401;
}

// The first Authorization field of the request, if any.
const HeaderField* authorization(const Request& r) {
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    if (iequals(r.fields[i].name, "authorization")) return &r.fields[i];
  }
  return nullptr;
}

// $remote_user: the user name of Basic credentials, whatever the location.
bool var_remote_user(const Request& r, std::string_view, VarSink& s) {
  char buf[kRemoteUserMax];
  bool found = false;
  s.put(remote_user(r, buf, found));
  return found;
}

const VarSpec kVariables[] = {{"remote_user", var_remote_user}};

}  // namespace

std::string_view remote_user(const Request& r, char* buf, bool& found) {
  found = false;
  const HeaderField* f = authorization(r);
  if (f == nullptr || f->value.size() > kRemoteUserMax) return {};
  std::string_view user, password;
  if (!parse_basic_credentials(f->value, buf, user, password)) return {};
  found = true;
  return user;
}

int auth_basic_check(Request& r) {
  const AuthBasicConf& conf = loc_conf<AuthBasicConf>(*r.loc, auth_basic_module());
  if (!conf.on || !conf.has_file) return kPhaseDeclined;
  HttpWorker& w = *r.hc->worker;
  // The scratch area is free until the content phase: the realm, the
  // decoded credentials and the file name are written there.
  char* scratch = w.scratch();
  std::size_t left = w.scratch_size();
  std::string_view realm = conf.realm.literal_text();
  if (!conf.realm.is_literal()) {
    const std::size_t n = conf.realm.length(r);
    if (n >= left) return 500;
    const char* end = conf.realm.write(r, scratch);
    realm = std::string_view(scratch, static_cast<std::size_t>(end - scratch));
    if (realm == "off") return kPhaseDeclined;
    scratch += realm.size();
    left -= realm.size();
  }

  // A second Authorization line never reaches here (process_request
  // refuses it: which set of credentials a proxy in front checked cannot be
  // known).
  const HeaderField* f = authorization(r);
  std::string_view user, password;
  if (f == nullptr || f->value.size() >= left ||
      !parse_basic_credentials(f->value, scratch, user, password)) {
    VIGIL_LOG(*r.c->log, kInfo, 0,
              "*%llu no user/password was provided for basic authentication, client: %.*s",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(r.c->addr_text.size()),
              r.c->addr_text.data());
    return unauthorized(r, conf, realm);
  }
  scratch += f->value.size();
  left -= f->value.size();

  // The file's name, NUL-terminated.
  const char* name = conf.user_file_path.c_str();
  if (!conf.user_file.is_literal()) {
    const std::size_t n = conf.user_file.length(r);
    if (conf.conf_prefix.size() + n + 1 > left) return 500;
    std::size_t len = 0;
    char* end = conf.user_file.write(r, scratch + conf.conf_prefix.size());
    const std::string_view value(scratch + conf.conf_prefix.size(),
                                 static_cast<std::size_t>(end - scratch) - conf.conf_prefix.size());
    if (!value.empty() && value[0] == '/') {
      std::memmove(scratch, value.data(), value.size());
      len = value.size();
    } else {
      std::memcpy(scratch, conf.conf_prefix.data(), conf.conf_prefix.size());
      len = conf.conf_prefix.size() + value.size();
    }
    scratch[len] = '\0';
    name = scratch;
  }

  const int fd = ::open(name, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    const int err = errno;
    // The errno goes at the end of the line: no ", client:" here, as with
    // the static module's open() failures.
    const auto number = static_cast<unsigned long long>(r.c->number);
    if (err == ENOENT) {
      VIGIL_LOG(*r.c->log, kError, err, "*%llu open() \"%s\" failed", number, name);
      return 403;
    }
    VIGIL_LOG(*r.c->log, kCrit, err, "*%llu open() \"%s\" failed", number, name);
    return 500;
  }
  HtpasswdScanner scan(user);
  char buf[4096];
  bool found = false;
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n == -1) {
      if (errno == EINTR) continue;
      const int err = errno;
      VIGIL_LOG(*r.c->log, kCrit, err, "*%llu pread() \"%s\" failed",
                static_cast<unsigned long long>(r.c->number), name);
      ::close(fd);
      return 500;
    }
    if (n == 0) {
      found = scan.finish();
      break;
    }
    offset += n;
    if (scan.feed(buf, static_cast<std::size_t>(n))) {
      found = true;
      break;
    }
  }
  if (::close(fd) == -1) {
    VIGIL_LOG(*r.c->log, kAlert, errno, "*%llu close() \"%s\" failed",
              static_cast<unsigned long long>(r.c->number), name);
  }
  if (!found) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu user \"%.*s\" was not found in \"%s\", client: %.*s",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(user.size()),
              user.data(), name, static_cast<int>(r.c->addr_text.size()), r.c->addr_text.data());
    return unauthorized(r, conf, realm);
  }
  const PasswordCheck check =
      scan.too_long() ? PasswordCheck::kMismatch : check_password(password, scan.hash());
  if (check == PasswordCheck::kMatch) return 0;
  if (check == PasswordCheck::kError) {
    VIGIL_LOG(*r.c->log, kCrit, errno, "*%llu crypt() of the password of user \"%.*s\" failed",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(user.size()),
              user.data());
    return 500;
  }
  VIGIL_LOG(*r.c->log, kError, 0, "*%llu user \"%.*s\": password mismatch, client: %.*s",
            static_cast<unsigned long long>(r.c->number), static_cast<int>(user.size()),
            user.data(), static_cast<int>(r.c->addr_text.size()), r.c->addr_text.data());
  return unauthorized(r, conf, realm);
}

const HttpModule& auth_basic_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_auth_basic");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AuthBasicConf>(
        {}, [](const ConfInit& ctx, const AuthBasicConf& parent, AuthBasicConf& child) {
          if (!ctx.is_set("auth_basic")) {
            child.on = parent.on;
            child.realm = parent.realm;
            child.header = parent.header;
          }
          if (!ctx.is_set("auth_basic_user_file")) {
            child.has_file = parent.has_file;
            child.user_file = parent.user_file;
            child.user_file_path = parent.user_file_path;
            child.conf_prefix = parent.conf_prefix;
          }
          return Status::ok();
        });
    constexpr ConfContextMask kWhere = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    m->conf().add("auth_basic", kWhere, Arity::exactly(1), conf.custom(set_realm));
    m->conf().add("auth_basic_user_file", kWhere, Arity::exactly(1), conf.custom(set_user_file));
    m->set_variables(kVariables);
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
