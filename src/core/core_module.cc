#include "core/core_module.h"

#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <utility>

#include "core/error_logs.h"
#include "core/syslog.h"

namespace vigil {

namespace {

constexpr int kWorkerProcessesAuto = -1;

Status set_worker_processes(const DirectiveCall& call, CoreConf& conf) {
  if (call.arg(0) == "auto") {
    conf.worker_processes = kWorkerProcessesAuto;
    return Status::ok();
  }
  // nginx accepts 0 (a master with no workers); it serves nothing, so refuse it.
  auto n = parse_number(call.arg(0));
  if (!n || *n < 1 || *n > INT_MAX) return call.invalid_value(0);
  conf.worker_processes = static_cast<int>(*n);
  return Status::ok();
}

// "0101": the rightmost digit is CPU 0, as nginx writes them.
bool parse_cpu_mask(const std::string& text, std::uint64_t* out) {
  if (text.empty() || text.size() > 64) return false;
  std::uint64_t mask = 0;
  for (char ch : text) {
    if (ch != '0' && ch != '1') return false;
    mask = (mask << 1) | static_cast<std::uint64_t>(ch - '0');
  }
  if (mask == 0) return false;  // no CPU at all
  *out = mask;
  return true;
}

// worker_cpu_affinity auto [mask] | mask ...
Status set_cpu_affinity(const DirectiveCall& call, CoreConf& conf) {
  std::size_t first = 0;
  if (call.arg(0) == "auto") {
    if (call.arg_count() > 2)
      return call.error("invalid number of arguments in \"worker_cpu_affinity\" directive");
    conf.cpu_affinity_auto = true;
    first = 1;
  }
  for (std::size_t i = first; i < call.arg_count(); ++i) {
    std::uint64_t mask = 0;
    if (!parse_cpu_mask(call.arg(i), &mask)) {
      return call.invalid_value(
          i, ", it must be \"auto\" or up to 64 \"0\" and \"1\" digits, not all \"0\"");
    }
    conf.cpu_affinity.push_back(mask);
  }
  return Status::ok();
}

// error_log file [level]; repeated, every one gets what its level admits.
Status set_error_log(const DirectiveCall& call, CoreConf& conf) {
  LogLevel chosen = LogLevel::kError;
  if (Status s = parse_error_log(call, &chosen); !s) return s;
  if (conf.error_log.empty()) {
    conf.error_log = call.arg(0);
    conf.error_log_level = chosen;
  } else {
    if (conf.more_error_logs.size() == static_cast<std::size_t>(Log::kMaxExtraTargets)) {
      return call.error("too many \"error_log\" directives");
    }
    conf.more_error_logs.emplace_back(call.arg(0), chosen);
  }
  return Status::ok();
}

class GlobResult {
 public:
  GlobResult() = default;
  ~GlobResult() { ::globfree(&g_); }
  GlobResult(const GlobResult&) = delete;
  GlobResult& operator=(const GlobResult&) = delete;
  glob_t* get() { return &g_; }

 private:
  glob_t g_{};
};

// include FILE | PATTERN: parses the file(s) in the context where the
// directive appears. A pattern that matches nothing is accepted, as in nginx
// (Debian's nginx.conf includes an empty conf.d/*.conf), with a warning: a
// silently empty conf.d/ is how a server ends up with no sites.
Status include(const DirectiveCall& call) {
  if (!call.env().allow_include) return call.error("\"include\" directive is disabled");
  const std::string& pattern = call.arg(0);
  if (pattern.empty()) return call.invalid_value(0);
  std::string full = call.env().conf_prefixed(pattern);
  if (full.find_first_of("*?[") == std::string::npos) {
    for (const auto& [name, text] : call.env().embedded_includes) {
      struct stat st {};
      if (name == pattern && ::stat(full.c_str(), &st) == -1 && errno == ENOENT) {
        return call.parser().parse_text(text, "conf/" + name + " (embedded)", false, call.sink());
      }
    }
    return call.parser().parse_file(full, call.sink(), call.where());
  }
  GlobResult g;
  int rc = ::glob(full.c_str(), 0, nullptr, g.get());  // sorted, so the order is stable
  if (rc == GLOB_NOMATCH) {
    if (call.env().warnings != nullptr) {
      call.env().warnings->push_back("include \"" + pattern + "\" matched no files" + call.where());
    }
    return Status::ok();
  }
  if (rc != 0) return call.error("glob() \"" + full + "\" failed");
  for (std::size_t i = 0; i < g.get()->gl_pathc; ++i) {
    Status s = call.parser().parse_file(g.get()->gl_pathv[i], call.sink(), call.where());
    if (!s) return s;
  }
  return Status::ok();
}

// user USER [GROUP]: resolved in init_core_conf, where the default applies too.
Status set_user(const DirectiveCall& call, CoreConf& conf) {
  if (call.arg(0).empty()) return call.invalid_value(0);
  if (call.arg_count() == 2 && call.arg(1).empty()) return call.invalid_value(1);
  conf.user = call.arg(0);
  conf.group = call.arg_count() == 2 ? call.arg(1) : std::string();
  conf.user_set = true;
  return Status::ok();
}

// nginx: the group defaults to one named as the user. Where there is none
// (Debian has no "nobody" group, only "nogroup") the user's own primary group
// is taken instead of failing.
Status resolve_user(CoreConf& conf) {
  errno = 0;
  const passwd* pw = ::getpwnam(conf.user.c_str());
  if (pw == nullptr) {
    return Status::error("getpwnam(\"" + conf.user + "\") failed" +
                         (conf.user_set ? "" : " (the default worker user; set \"user\")"));
  }
  conf.user_uid = pw->pw_uid;
  const gid_t primary = pw->pw_gid;
  if (!conf.group.empty()) {
    const group* gr = ::getgrnam(conf.group.c_str());
    if (gr == nullptr) return Status::error("getgrnam(\"" + conf.group + "\") failed");
    conf.user_gid = gr->gr_gid;
    return Status::ok();
  }
  if (const group* gr = ::getgrnam(conf.user.c_str()); gr != nullptr) {
    conf.group = conf.user;
    conf.user_gid = gr->gr_gid;
    return Status::ok();
  }
  conf.user_gid = primary;
  if (const group* gr = ::getgrgid(primary); gr != nullptr) {
    conf.group = gr->gr_name;
  } else {
    conf.group = std::to_string(primary);
  }
  return Status::ok();
}

Status set_rlimit_core(const DirectiveCall& call, CoreConf& conf) {
  auto v = parse_size(call.arg(0));
  if (!v || *v > static_cast<std::uint64_t>(LLONG_MAX)) return call.invalid_value(0);
  conf.worker_rlimit_core = static_cast<long long>(*v);
  return Status::ok();
}

Status init_core_conf(const ConfInit& ctx, CoreConf& conf) {
  // Only a master running as root can give its workers other credentials
  // (nginx ignores "user" otherwise, and -t says so).
  if (::geteuid() == 0) {
    if (!conf.user_set) {
      conf.user = "nobody";
      conf.group.clear();
    }
    if (Status s = resolve_user(conf); !s) return s;
  }
  if (!conf.working_directory.empty()) {
    conf.working_directory = ctx.env().prefixed(conf.working_directory);
  }
  if (!ctx.is_set("worker_processes")) {
    conf.worker_processes = 1;
  } else if (conf.worker_processes == kWorkerProcessesAuto) {
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    conf.worker_processes = cpus > 0 && cpus <= INT_MAX ? static_cast<int>(cpus) : 1;
  }
  conf.pid_path = ctx.env().prefixed(conf.pid_path);
  if (!conf.lock_file.empty()) conf.lock_file = ctx.env().prefixed(conf.lock_file);
  if (!ctx.is_set("error_log")) {
    const std::string& given = ctx.env().default_error_log;
    conf.error_log = given.empty() ? "logs/error.log" : given;
    conf.error_log_level = LogLevel::kError;
  }
  // stderr and syslog targets are not paths.
  auto is_file = [](const std::string& t) {
    return t != "stderr" && !t.starts_with(SyslogPeer::kPrefix);
  };
  if (is_file(conf.error_log)) conf.error_log = ctx.env().prefixed(conf.error_log);
  for (auto& [path, level] : conf.more_error_logs) {
    if (is_file(path)) path = ctx.env().prefixed(path);
  }
  return Status::ok();
}

Module* make_core_module() {
  auto* m = new Module("core");
  auto core = m->add_conf<CoreConf>(kMainConf, init_core_conf);
  m->add("worker_processes", kMainConf, Arity::exactly(1), core.custom(set_worker_processes));
  m->add("daemon", kMainConf, Arity::on_off(), core.flag(&CoreConf::daemon, true));
  m->add("master_process", kMainConf, Arity::on_off(), core.flag(&CoreConf::master_process, true));
  m->add("pid", kMainConf, Arity::exactly(1),
         core.string(&CoreConf::pid_path, "logs/vigil.pid", /*allow_empty=*/false));
  m->add("error_log", kMainConf, Arity::between(1, 2), core.custom(set_error_log)).multiple = true;
  m->add("worker_rlimit_nofile", kMainConf, Arity::exactly(1),
         core.number<long>(&CoreConf::worker_rlimit_nofile, -1, 1));
  m->add("timer_resolution", kMainConf, Arity::exactly(1),
         core.msec(&CoreConf::timer_resolution, 0));
  // nginx uses its lock file only where atomics are missing; here setting it
  // selects the fcntl() lock for the accept mutex (seed 004's fallback).
  m->add("lock_file", kMainConf, Arity::exactly(1),
         core.string(&CoreConf::lock_file, "", /*allow_empty=*/false));
  m->add("worker_shutdown_timeout", kMainConf, Arity::exactly(1),
         core.msec(&CoreConf::worker_shutdown_timeout, 0));
  m->add("worker_cpu_affinity", kMainConf, Arity::one_or_more(), core.custom(set_cpu_affinity));
  m->add("user", kMainConf, Arity::between(1, 2), core.custom(set_user));
  m->add("working_directory", kMainConf, Arity::exactly(1),
         core.string(&CoreConf::working_directory, "", /*allow_empty=*/false));
  m->add("worker_rlimit_core", kMainConf, Arity::exactly(1), core.custom(set_rlimit_core));
  m->add("include", kAnyConf, Arity::exactly(1), DirectiveBody::handler(include)).multiple = true;
  return m;
}

}  // namespace

const Module& core_module() {
  static const Module* module = make_core_module();  // never destroyed: used until exit
  return *module;
}

}  // namespace vigil
