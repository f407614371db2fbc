#include "event/event_conf.h"

#include <cctype>
#include <climits>
#include <string>

#include "vigil/event/backend.h"

namespace vigil {

namespace {

// Both counts size arrays handed to the kernel as int (epoll_wait's maxevents,
// fd numbers), so they stay within int.
constexpr std::size_t kMaxCount = INT_MAX;

Module* make_event_module() {
  auto* m = new Module("events");
  auto ev = m->add_conf<EventConf>(kEventsConf);
  m->add_block("events", kMainConf, Arity::none(), kEventsConf).required = true;
  m->add("worker_connections", kEventsConf, Arity::exactly(1),
         ev.number<std::size_t>(&EventConf::connections, 512, 1, kMaxCount));
  // The name is checked here, and whether this build and this kernel have
  // that backend (a kernel without io_uring, or one that refuses it, is an
  // [emerg] at -t, not a surprise at start).
  m->add("use", kEventsConf, Arity::exactly(1),
         ev.custom([](const DirectiveCall& call, EventConf& conf) -> Status {
           std::string name(call.arg(0));  // keywords are case-insensitive, as in nginx
           for (char& ch : name)
             ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
           if (name != "epoll" && name != "poll" && name != "select" && name != "io_uring" &&
               name != "kqueue") {
             return call.invalid_value(0,
                                       ", it must be \"epoll\", \"poll\", \"select\", "
                                       "\"io_uring\" or \"kqueue\"");
           }
           if (Status s = probe_backend(name); !s) return call.error(s.to_string());
           conf.use = name;
           return Status::ok();
         }));
  m->add("multi_accept", kEventsConf, Arity::on_off(), ev.flag(&EventConf::multi_accept, false));
  m->add("accept_mutex", kEventsConf, Arity::on_off(), ev.flag(&EventConf::accept_mutex, false));
  m->add("accept_mutex_delay", kEventsConf, Arity::exactly(1),
         ev.msec(&EventConf::accept_mutex_delay, 500));
  m->add("epoll_events", kEventsConf, Arity::exactly(1),
         ev.number<std::size_t>(&EventConf::epoll_events, 512, 1, kMaxCount));
  // ngx_kqueue_module's two (seed 003): the change list batched into one
  // kevent() and the events one kevent() returns. Accepted whatever the
  // backend, as nginx accepts epoll_events on kqueue builds' configurations.
  m->add("kqueue_changes", kEventsConf, Arity::exactly(1),
         ev.number<std::size_t>(&EventConf::kqueue_changes, 512, 1, kMaxCount));
  m->add("kqueue_events", kEventsConf, Arity::exactly(1),
         ev.number<std::size_t>(&EventConf::kqueue_events, 512, 1, kMaxCount));
  return m;
}

}  // namespace

const EventConf& event_conf(const Configuration& conf) {
  return conf.get<EventConf>(event_module());
}

const Module& event_module() {
  static const Module* module = make_event_module();  // never destroyed: used until exit
  return *module;
}

}  // namespace vigil
