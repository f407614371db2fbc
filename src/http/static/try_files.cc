// try_files file ... uri;  try_files file ... =code;  (server, location)
//
// nginx's try files phase: each "file" is evaluated (variables allowed),
// appended to the location's root and opened in order, through the
// location's open_file_cache and under its disable_symlinks rule, as the
// static handler opens files. A name written with a trailing '/' must be a
// directory, any other must not be one. The first that matches becomes the
// request's URI ($uri) and the location's handler serves it (a directory
// goes on to index, or to the 301 that adds the slash). When none matches,
// the last argument decides: "=code" answers that status (error_page
// applies), a URI is an internal redirect: location matching again, the
// arguments those after its '?' (none without one, as nginx). Locations
// reached that way run their own try_files; after 10 redirects the request
// is answered with 500 and the cycle logged, as nginx.
//
// Not inherited by nested locations (nginx neither). Named locations do not
// exist here, so "@name" is refused when the configuration is loaded.
//
// Nothing is allocated per request: values are written into the worker's
// scratch, and the new URI into the request's URI buffer (a worker buffer,
// taken once per request at most).
#include "http/static/try_files.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/static/map_path.h"
#include "http/static/open_file_cache.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

Status set_try_files(const DirectiveCall& call, TryFilesConf& loc) {
  auto tf = std::make_shared<TryFiles>();
  const std::size_t last = call.arg_count() - 1;
  for (std::size_t i = 0; i < last; ++i) {
    std::string name = call.arg(i);
    TryFile f;
    if (!name.empty() && name.back() == '/') {
      f.test_dir = true;
      name.pop_back();
    }
    auto t = VarTemplate::compile(name);
    if (!t) return call.error(t.status().message());
    f.name = std::move(t.value());
    tf->files.push_back(std::move(f));
  }
  const std::string& fallback = call.arg(last);
  if (fallback.starts_with("=")) {
    auto code = parse_number(std::string_view(fallback).substr(1));
    // nginx takes any number up to 999; the statuses an answer can carry
    // here are those error_page knows.
    if (!code || *code < 300 || *code > 599) {
      return call.error("invalid code \"" + fallback + "\", it must be between =300 and =599");
    }
    tf->code = static_cast<int>(*code);
  } else if (fallback.starts_with("@")) {
    tf->named = fallback;  // found when used, as nginx does
  } else {
    auto t = VarTemplate::compile(fallback);
    if (!t) return call.error(t.status().message());
    if (t.value().is_literal() && !fallback.starts_with("/")) {
      return call.error("try_files URI \"" + fallback + "\" must start with \"/\"");
    }
    tf->fallback = std::move(t.value());
  }
  loc.try_files = std::move(tf);
  return Status::ok();
}

// A ".." segment would climb out of the root: $uri never has one (it is
// normalised), but a value built from other variables might.
bool climbs(std::string_view v) {
  for (std::size_t pos = v.find(".."); pos != std::string_view::npos; pos = v.find("..", pos + 1)) {
    const bool starts = pos == 0 || v[pos - 1] == '/';
    const bool ends = pos + 2 == v.size() || v[pos + 2] == '/';
    if (starts && ends) return true;
  }
  return v.find('\0') != std::string_view::npos;
}

// Whether root + `value` exists as what `f` asks for. `name` holds the root
// and room after it.
bool exists(Request& r, const TryFile& f, char* name, std::size_t root_len,
            std::string_view value) {
  name[root_len + value.size()] = '\0';
  const std::string_view path(name, root_len + value.size());
  OpenFileInfo info;
  FileRef ref;
  open_file(r, *r.loc, path, info, ref);
  drop(r, ref);
  if (info.err != 0) {
    if (info.err != ENOENT && info.err != ENOTDIR && info.err != ENAMETOOLONG) {
      VIGIL_LOG(*r.c->log, kCrit, info.err, "*%llu %s() \"%s\" failed",
                static_cast<unsigned long long>(r.c->number), info.failed, name);
    }
    return false;
  }
  return info.is_dir == f.test_dir;
}

enum class Tried { kFound, kNone, kError };

// The "file" arguments of r.loc, in order; on kFound r.uri is the match.
Tried try_each(Request& r, const TryFiles& tf) {
  HttpWorker& w = *r.hc->worker;
  char* name = w.scratch();
  const HttpLocConf& loc = *r.loc;
  const std::size_t root_len = document_root(r, loc, name, w.scratch_size() - 1);
  if (root_len == std::string::npos) return Tried::kError;
  const std::size_t room = w.scratch_size() - root_len - 1;
  for (const TryFile& f : tf.files) {
    const std::size_t need = f.name.length(r);
    if (need > room || need > r.hc->srv->large_buffers_size) {
      VIGIL_LOG(*r.c->log, kError, 0, "*%llu try_files \"%s\" is too long for the request",
                static_cast<unsigned long long>(r.c->number), f.name.source().c_str());
      continue;
    }
    char* value = name + root_len;
    std::string_view v(value, static_cast<std::size_t>(f.name.write(r, value) - value));
    // With alias, a value that starts with the location's name has that
    // part replaced by the alias (nginx's try_files).
    std::size_t skip = 0;
    if (loc.alias && loc.alias_len != std::string::npos && v.starts_with(loc.alias_name)) {
      skip = loc.alias_len;
    }
    if (climbs(v)) {
      VIGIL_LOG(*r.c->log, kError, 0, "*%llu try_files \"%.*s\" climbs out of the root",
                static_cast<unsigned long long>(r.c->number), static_cast<int>(v.size()), v.data());
      continue;
    }
    if (skip == 0) {
      if (!exists(r, f, name, root_len, v)) continue;
      if (!set_request_uri(r, v)) return Tried::kError;
      // A regular-expression location's alias is the file's directory now
      // (nginx's add_uri_to_alias).
      if (loc.alias && loc.alias_len == std::string::npos && !f.test_dir) r.add_uri_to_alias = true;
      return Tried::kFound;
    }
    // The URI that is found stays whole: kept in the request's memory
    // before the name is shortened in place.
    char* uri = request_alloc(r, v.size());
    if (uri == nullptr) return Tried::kError;
    std::memcpy(uri, v.data(), v.size());
    std::memmove(value, value + skip, v.size() - skip);
    if (!exists(r, f, name, root_len, v.substr(0, v.size() - skip))) continue;
    if (!set_request_uri(r, std::string_view(uri, v.size()))) return Tried::kError;
    return Tried::kFound;
  }
  return Tried::kNone;
}

}  // namespace

const HttpModule& try_files_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_try_files");  // never destroyed: used until exit
    auto loc = m->add_loc_conf<TryFilesConf>();    // no merge: never inherited
    m->conf().add("try_files", kHttpSrvConf | kHttpLocConf, Arity::at_least(2),
                  loc.custom(set_try_files));
    return m;
  }();
  return *module;
}

const TryFiles* location_try_files(const HttpLocConf& loc) {
  return loc_conf<TryFilesConf>(loc, try_files_module()).try_files.get();
}

namespace {

int try_files_handler(Request& r) {
  const TryFiles* conf = location_try_files(*r.loc);
  if (conf == nullptr) return kPhaseDeclined;
  const TryFiles& tf = *conf;
  const Tried t = try_each(r, tf);
  if (t == Tried::kFound) return kPhaseNext;
  if (t == Tried::kError) return 500;
  if (tf.code != 0) return tf.code;
  if (!tf.named.empty()) return named_location_redirect(r, tf.named);

  // The internal redirect: evaluated into the scratch, then copied.
  HttpWorker& w = *r.hc->worker;
  const std::size_t need = tf.fallback.length(r);
  if (need > w.scratch_size()) return 500;
  char* target = w.scratch();
  const std::string_view v(target,
                           static_cast<std::size_t>(tf.fallback.write(r, target) - target));
  const std::string_view uri = v.substr(0, v.find('?'));
  if (uri.empty() || uri[0] != '/' || climbs(uri)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu try_files redirect to invalid URI \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(v.size()), v.data());
    return 500;
  }
  if (!set_request_uri_and_args(r, v)) return 500;
  return internal_redirect(r);  // the locations are matched again for the new URI
}

}  // namespace

void add_try_files_phase(PhaseEngine& engine) {
  engine.add(HttpPhase::kTryFiles, try_files_handler);
}

}  // namespace vigil::http
