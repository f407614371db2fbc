#include "event/event_conf.h"

#include <climits>

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
  // The name is checked here; whether that backend exists in this build and
  // on this kernel is the event loop's decision when it starts.
  m->add(
      "use", kEventsConf, Arity::exactly(1),
      ev.one_of<std::string>(
          &EventConf::use, "",
          {{"epoll", "epoll"}, {"poll", "poll"}, {"select", "select"}, {"io_uring", "io_uring"}}));
  m->add("multi_accept", kEventsConf, Arity::on_off(), ev.flag(&EventConf::multi_accept, false));
  m->add("accept_mutex", kEventsConf, Arity::on_off(), ev.flag(&EventConf::accept_mutex, false));
  m->add("accept_mutex_delay", kEventsConf, Arity::exactly(1),
         ev.msec(&EventConf::accept_mutex_delay, 500));
  m->add("epoll_events", kEventsConf, Arity::exactly(1),
         ev.number<std::size_t>(&EventConf::epoll_events, 512, 1, kMaxCount));
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
