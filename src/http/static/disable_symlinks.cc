// disable_symlinks off | on | if_not_owner [from=part] (nginx's
// ngx_open_file_wrapper with openat): a file is opened one path component at
// a time from a directory fd, each with O_NOFOLLOW (on), or following the
// link and comparing the owner of the link with the owner of its target
// (if_not_owner). The part given by from= (usually $document_root) is opened
// as it is, unchecked; $document_root there is the request's (evaluated
// when the root or alias has variables), and a part that is the whole name
// leaves nothing to check. A name ending in '/' opens its last component as
// a directory. A symbolic link that is refused gives ELOOP, which the
// static handler answers with 403.
//
// One difference from nginx on Linux: a symlinked directory in the middle of
// the path fails O_DIRECTORY|O_NOFOLLOW with ENOTDIR (nginx then answers 404);
// we look at it and answer 403, as for a symlinked file.
//
// As nginx, a level that does not set disable_symlinks inherits its parent's
// rule whole (the mode and from=).
#include "http/static/disable_symlinks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/static/map_path.h"

namespace vigil::http {
namespace {

constexpr int kSearchFlags = O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC;

// Opens `comp` under `dir` by the mode's rule; -1 with errno.
int open_component(int dir, const char* comp, int flags, DisableSymlinks mode) {
  if (mode == DisableSymlinks::kOn) {
    int fd = ::openat(dir, comp, flags | O_NOFOLLOW);
    if (fd == -1 && errno == ENOTDIR && (flags & O_DIRECTORY) != 0) {
      struct stat lst;
      if (::fstatat(dir, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
        errno = ELOOP;
      } else {
        errno = ENOTDIR;
      }
    }
    return fd;
  }
  // if_not_owner: follow, then compare the owners of the name and the target.
  int fd = ::openat(dir, comp, flags);
  if (fd == -1) return -1;
  struct stat st;
  struct stat lst;
  if (::fstat(fd, &st) == -1 || ::fstatat(dir, comp, &lst, AT_SYMLINK_NOFOLLOW) == -1) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  if (S_ISLNK(lst.st_mode) && lst.st_uid != st.st_uid) {
    ::close(fd);
    errno = ELOOP;
    return -1;
  }
  return fd;
}

}  // namespace

int open_file_checked(const Request* r, const HttpLocConf& loc, const char* name, int flags) {
  const DisableSymlinksConf& rule = disable_symlinks_conf(loc);
  if (rule.mode == DisableSymlinks::kOff) return ::open(name, flags);
  const std::string_view path(name);
  if (path.empty() || path[0] != '/') return ::open(name, flags);

  char buf[PATH_MAX];
  std::string_view from = rule.from;
  if (from == "$document_root") {
    // The request's document root: a root or alias with variables is
    // evaluated for it (an alias naming the file itself is the whole path).
    from = loc.root_path;
    if (r != nullptr && loc.root_vars != nullptr) {
      const std::size_t n = document_root(*r, loc, buf, sizeof buf);
      if (n == std::string::npos) {
        errno = ENAMETOOLONG;
        return -1;
      }
      from = std::string_view(buf, n);
    }
  }
  // As nginx, a from= part that is the whole name leaves nothing to check.
  if (from == path) return ::open(name, flags);
  while (from.size() > 1 && from.back() == '/') from.remove_suffix(1);

  std::size_t pos = 1;  // after the leading '/'
  int dir;
  if (!from.empty() && from.size() < sizeof buf && path.starts_with(from) &&
      (path.size() == from.size() || path[from.size()] == '/' || from == "/")) {
    if (from.data() != buf) std::memcpy(buf, from.data(), from.size());
    buf[from.size()] = '\0';
    dir = ::open(buf, kSearchFlags);
    pos = from.size();
  } else {
    dir = ::open("/", kSearchFlags);
  }
  if (dir == -1) return -1;

  for (;;) {
    while (pos < path.size() && path[pos] == '/') ++pos;
    if (pos >= path.size()) {
      // The name ends at a directory (with a '/', the "from" part, or "/"):
      // it is opened again with the caller's flags.
      const int fd = ::openat(dir, ".", flags);
      const int err = errno;
      ::close(dir);
      errno = err;
      return fd;
    }
    std::size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    // A component followed by '/' is a directory even when it is the last
    // one: a file named "f/" is not found (ENOTDIR), as open(2) has it.
    const bool last = end == path.size();
    const std::size_t len = end - pos;
    if (len >= sizeof buf) {
      ::close(dir);
      errno = ENAMETOOLONG;
      return -1;
    }
    std::memcpy(buf, path.data() + pos, len);
    buf[len] = '\0';
    const int fd = open_component(dir, buf, last ? flags : kSearchFlags, rule.mode);
    const int err = errno;
    ::close(dir);
    if (fd == -1 || last) {
      errno = err;
      return fd;
    }
    dir = fd;
    pos = end;
  }
}

namespace {

// disable_symlinks off | on | if_not_owner [from=part]
Status set_disable_symlinks(const DirectiveCall& call, DisableSymlinksConf& l) {
  const std::string& mode = call.arg(0);
  if (mode == "off") {
    l.mode = DisableSymlinks::kOff;
  } else if (mode == "on") {
    l.mode = DisableSymlinks::kOn;
  } else if (mode == "if_not_owner") {
    l.mode = DisableSymlinks::kIfNotOwner;
  } else {
    return call.error("invalid value \"" + mode + "\" in \"disable_symlinks\" directive");
  }
  l.from.clear();
  if (call.arg_count() == 2) {
    const std::string& a = call.arg(1);
    if (!a.starts_with("from=")) {
      return call.error("invalid parameter \"" + a + "\"");
    }
    if (l.mode == DisableSymlinks::kOff) {
      return call.error("\"from=\" cannot be used with \"off\" parameter");
    }
    std::string from = a.substr(5);
    if (from.empty()) return call.error("invalid parameter \"" + a + "\"");
    if (from != "$document_root") {
      if (from.find('$') != std::string::npos) {
        return call.error("only \"$document_root\" is supported as a variable in \"from=\"");
      }
      from = call.env().prefixed(from);
    }
    l.from = std::move(from);
  }
  return Status::ok();
}

}  // namespace

const HttpModule& disable_symlinks_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_disable_symlinks");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<DisableSymlinksConf>(
        {}, [](const ConfInit& ctx, const DisableSymlinksConf& parent, DisableSymlinksConf& child) {
          if (!ctx.is_set("disable_symlinks")) child = parent;
          return Status::ok();
        });
    m->conf().add("disable_symlinks", kHttpMainConf | kHttpSrvConf | kHttpLocConf,
                  Arity::between(1, 2), conf.custom(set_disable_symlinks));
    return m;
  }();
  return *module;
}

const DisableSymlinksConf& disable_symlinks_conf(const HttpLocConf& loc) {
  return loc_conf<DisableSymlinksConf>(loc, disable_symlinks_module());
}

}  // namespace vigil::http
