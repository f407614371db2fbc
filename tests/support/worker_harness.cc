// worker_harness: the vigil runtime (master, workers, signals, reload) with a
// test-only protocol, so the process model can be tested with real processes
// and sockets before (and independently of) HTTP. Built by CMake from
// tests/support/; never part of the vigil program.
//
//   worker_harness -p PREFIX -c CONF [-g DIRECTIVES] [-s stop|quit|reopen|reload]
//
// The configuration is vigil's, plus one main-context directive:
//   harness_listen ADDRESS [reuseport] [backlog=N];     (may repeat)
//
// Each connection reads one request head (up to a blank line, "\n\n" or
// "\r\n\r\n"; its first line is "METHOD PATH ..."), answers with an HTTP/1.0
// response and closes. Until its first byte a connection is idle (reusable,
// with no request started: graceful shutdown closes it after the worker's
// grace for fresh connections); once bytes arrived it is a request in flight
// (c.requests counts it). Paths:
//   /                    body "<pid> <worker index>\n"
//   /sleep/MS            the same, after MS milliseconds (a slow request)
//   /hold-accept-mutex   takes the accept mutex, answers "held <pid>\n" and
//                        then blocks with the lock held until killed (the
//                        respawn/force-unlock test)
//   /metrics             one line per used slot of the shared counters:
//                        "slot I pid P accepted A used U max M iterations N",
//                        then "requests R": requests started (first byte
//                        read) by every worker, this one included
//   /exit/CODE           the worker exits at once with CODE
// On USR1 the protocol's reopen_logs hook logs "harness: reopen_logs".
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "event/event_conf.h"
#include "http/core/counters.h"
#include "server/modules.h"
#include "server/runtime.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

using namespace vigil;

namespace {

constexpr Msec kReadTimeout = 30000;
constexpr std::size_t kHeadMax = 2048;

struct ListenSpec {
  std::string address;
  bool reuseport = false;
  int backlog = 511;
};

struct HarnessConf {
  std::vector<ListenSpec> listens;
};

Status set_listen(const DirectiveCall& call, HarnessConf& conf) {
  ListenSpec spec;
  spec.address = call.arg(0);
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a == "reuseport") {
      spec.reuseport = true;
    } else if (a.rfind("backlog=", 0) == 0 && a.size() > 8) {
      spec.backlog = std::atoi(a.c_str() + 8);
    } else {
      return call.invalid_value(i);
    }
  }
  conf.listens.push_back(spec);
  return Status::ok();
}

const Module& harness_module() {
  static const Module* m = [] {
    auto* mod = new Module("harness");
    auto slot = mod->add_conf<HarnessConf>(kMainConf);
    mod->add("harness_listen", kMainConf, Arity::between(1, 3), slot.custom(set_listen)).multiple =
        true;
    return mod;
  }();
  return *m;
}

int g_worker_index = 0;

struct Request {
  char head[kHeadMax];
  std::size_t len = 0;
};

void close_conn(Connection& c) {
  c.loop->pool().close_connection(c);
}

void respond(Connection& c, const std::string& body) {
  std::string out = "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n" + body;
  std::size_t off = 0;
  while (off < out.size()) {
    long n = c.send(c, out.data() + off, out.size() - off);
    if (n <= 0) break;  // a response this small fits the socket buffer; else drop it
    off += static_cast<std::size_t>(n);
  }
  close_conn(c);
}

std::string pid_body() {
  return std::to_string(::getpid()) + " " + std::to_string(g_worker_index) + "\n";
}

std::string metrics_body() {
  std::string out;
  const WorkerSlot* slots = worker_slots();
  for (std::size_t i = 0; i < kMaxWorkers; ++i) {
    const WorkerSlot& s = slots[i];
    pid_t pid = s.pid.load();
    if (pid == 0) continue;
    out += "slot " + std::to_string(i) + " pid " + std::to_string(pid) + " accepted " +
           std::to_string(s.accepted.load()) + " used " +
           std::to_string(s.connections_used.load()) + " max " +
           std::to_string(s.connections_max.load()) + " iterations " +
           std::to_string(s.iterations.load()) + "\n";
  }
  out += "requests " + std::to_string(http::http_counters()->requests.get()) + "\n";
  return out;
}

void on_sleep_done(Event& wev) {
  respond(*wev.owner<Connection>(), pid_body());
}

void hold_accept_mutex(Connection& c) {
  ProcessMutex* m = c.loop->accept_mutex();
  if (m == nullptr) return respond(c, "no accept mutex\n");
  while (!m->trylock()) ::usleep(1000);
  respond(c, "held " + std::to_string(::getpid()) + "\n");
  // Blocks with the lock held, as a worker stuck or killed between trylock
  // and unlock would leave it. Only a signal that stops the worker ends this.
  for (;;) {
    ::pause();
    if (signals::flags().terminate) ::_exit(0);
  }
}

void handle(Connection& c, Request& r) {
  std::string line(r.head, strnlen(r.head, r.len));
  line = line.substr(0, line.find_first_of("\r\n"));
  std::size_t sp = line.find(' ');
  std::string path = sp == std::string::npos ? "/" : line.substr(sp + 1);
  path = path.substr(0, path.find(' '));

  if (path == "/hold-accept-mutex") return hold_accept_mutex(c);
  if (path == "/metrics") return respond(c, metrics_body());
  if (path.rfind("/exit/", 0) == 0) ::_exit(std::atoi(path.c_str() + 6));
  if (path.rfind("/sleep/", 0) == 0) {
    c.loop->del_timer(*c.read);
    c.write->handler = on_sleep_done;
    c.loop->add_timer(*c.write, static_cast<Msec>(std::atol(path.c_str() + 7)));
    return;
  }
  respond(c, pid_body());
}

bool head_complete(const Request& r) {
  std::string_view v(r.head, r.len);
  return v.find("\r\n\r\n") != std::string_view::npos || v.find("\n\n") != std::string_view::npos;
}

void on_read(Event& rev) {
  auto& c = *rev.owner<Connection>();
  auto& r = *static_cast<Request*>(c.data);
  if (rev.timedout || c.close) return close_conn(c);  // too slow, or closed as idle
  for (;;) {
    if (r.len == kHeadMax) return close_conn(c);
    long n = c.recv(c, r.head + r.len, kHeadMax - r.len);
    if (n == kIoAgain) break;
    if (n <= 0) return close_conn(c);
    r.len += static_cast<std::size_t>(n);
    // A byte arrived: a request is in flight and must not be closed as idle.
    if (c.reusable) {
      c.loop->pool().reusable(c, false);
      ++c.requests;
      http::http_counters()->requests.add();
    }
    if (head_complete(r)) return handle(c, r);
  }
  if (!c.loop->handle_read_event(rev)) close_conn(c);
}

void on_accept(Connection& c) {
  void* mem = c.arena->alloc(sizeof(Request), alignof(Request));
  if (mem == nullptr) return close_conn(c);
  c.data = new (mem) Request();
  c.read->handler = on_read;
  c.loop->pool().reusable(c, true);  // idle until the first byte
  c.loop->add_timer(*c.read, kReadTimeout);
  if (c.read->ready) return on_read(*c.read);
  if (!c.loop->handle_read_event(*c.read)) close_conn(c);
}

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out) {
  const HarnessConf* hc = conf.find<HarnessConf>(harness_module());
  if (hc == nullptr) return Status::ok();
  for (const ListenSpec& spec : hc->listens) {
    auto ls = std::make_unique<Listening>();
    if (Status s = ls->set_address(spec.address); !s) return s;
    ls->reuseport = spec.reuseport;
    ls->backlog = spec.backlog;
    ls->handler = on_accept;
    out.push_back(std::move(ls));
  }
  return Status::ok();
}

Status init_worker(const Configuration&, EventLoop&, int worker_index) {
  g_worker_index = worker_index;
  return Status::ok();
}

void reopen_logs(EventLoop&) {
  VIGIL_LOG(Log::global(), kNotice, 0, "harness: reopen_logs");
}

}  // namespace

int main(int argc, char** argv) {
  std::string prefix, conf_path, directives, signal;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    std::string* to = opt == "-p"   ? &prefix
                      : opt == "-c" ? &conf_path
                      : opt == "-g" ? &directives
                      : opt == "-s" ? &signal
                                    : nullptr;
    if (to == nullptr) {
      std::fprintf(stderr, "worker_harness: unknown option \"%s\"\n", argv[i]);
      return 1;
    }
    *to = argv[i + 1];
  }

  static const ModuleRegistry registry{&core_module(), &event_module(), &harness_module()};
  ConfLoadOptions lo;
  lo.prefix = prefix;
  lo.conf_path = conf_path;
  lo.extra_directives = directives;
  lo.allow_embedded = false;
  lo.modules = &registry;
  auto conf = Configuration::load(lo);
  if (!conf) {
    std::fprintf(stderr, "worker_harness: [emerg] %s\n", conf.status().message().c_str());
    return 1;
  }

  if (!signal.empty()) {
    const int signo = signals::from_command(signal.c_str());
    auto pid = read_pid_file(conf.value()->core().pid_path);
    if (signo == 0 || !pid) {
      std::fprintf(stderr, "worker_harness: cannot signal: %s\n", pid.status().to_string().c_str());
      return 1;
    }
    if (::kill(pid.value(), signo) == -1) {
      std::fprintf(stderr, "worker_harness: kill(%d) failed: %s\n", pid.value(),
                   std::strerror(errno));
      return 1;
    }
    return 0;
  }

  Log& log = Log::global();
  const CoreConf& core = conf.value()->core();
  if (Status s = open_error_logs(log, core); !s) {
    std::fprintf(stderr, "worker_harness: [emerg] %s\n", s.to_string().c_str());
    return 1;
  }
  ServerModule hooks{"harness"};
  hooks.create_listeners = create_listeners;
  hooks.init_worker = init_worker;
  hooks.reopen_logs = reopen_logs;
  add_server_module(hooks);
  return run_server(std::move(conf).value(), lo, log);
}
