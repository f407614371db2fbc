// The per-worker cache of idle upstream connections (nginx's
// ngx_http_upstream_keepalive_module): up to `keepalive N` per group and
// loop, least recently used evicted first. An idle connection stays
// registered for reading: any read event (the backend closed it, or sent
// bytes nobody asked for) closes it and drops it from the cache at once, so
// a stale connection is never handed out. `keepalive_timeout` closes it
// after that long idle; pool draining (worker_connections short, shutdown)
// closes it through Connection::close like any idle connection.
#include "upstream/keepalive.h"

#include <sys/socket.h>

#include <memory>
#include <vector>

#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {

namespace {

struct GroupCache;

struct Item {
  Item* prev = nullptr;
  Item* next = nullptr;
  Connection* c = nullptr;
  const Peer* peer = nullptr;
  const void* key = nullptr;  // PeerRequest::reuse_key of the request that used it
  GroupCache* cache = nullptr;
  Msec born = 0;  // when the connection was made (keepalive_time)
};

// Intrusive ring with a sentinel: `cached` has the most recent first.
struct List {
  Item head;
  List() { head.prev = head.next = &head; }
  bool empty() const { return head.next == &head; }
  void push_front(Item& i) {
    i.next = head.next;
    i.prev = &head;
    head.next->prev = &i;
    head.next = &i;
  }
  static void unlink(Item& i) {
    i.prev->next = i.next;
    i.next->prev = i.prev;
    i.prev = i.next = nullptr;
  }
};

struct GroupCache {
  const Group* group = nullptr;
  EventLoop* loop = nullptr;
  std::unique_ptr<Item[]> items;
  List cached;
  List free;
  std::size_t count = 0;
};

struct LoopCaches {
  std::vector<std::unique_ptr<GroupCache>> groups;
};

const char kContextKey = 0;  // the address is the key of our per-loop state

LoopCaches* caches(EventLoop& loop, bool create) {
  if (!create) return static_cast<LoopCaches*>(loop.context(&kContextKey));
  LoopCaches* lc = loop.context_or_make<LoopCaches>(&kContextKey);
  if (lc == nullptr) {
    VIGIL_LOG(loop.log(), kAlert, 0, "upstream keepalive: no memory or no free loop context slot");
  }
  return lc;
}

GroupCache* cache_of(EventLoop& loop, const Group& group, bool create) {
  LoopCaches* lc = caches(loop, create);
  if (lc == nullptr) return nullptr;
  for (auto& gc : lc->groups) {
    if (gc->group == &group) return gc.get();
  }
  if (!create) return nullptr;
  auto gc = std::make_unique<GroupCache>();
  gc->group = &group;
  gc->loop = &loop;
  gc->items = std::make_unique<Item[]>(group.keepalive);
  for (unsigned i = 0; i < group.keepalive; ++i) {
    gc->items[i].cache = gc.get();
    gc->free.push_front(gc->items[i]);
  }
  lc->groups.push_back(std::move(gc));
  return lc->groups.back().get();
}

void dummy_handler(Event&) {}

// Drops the item's connection from the cache and closes it.
void close_item(Item& item) {
  GroupCache& gc = *item.cache;
  Connection* c = item.c;
  List::unlink(item);
  gc.free.push_front(item);
  --gc.count;
  item.c = nullptr;
  item.peer = nullptr;
  gc.loop->pool().close_connection(*c);
}

void close_handler(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto& item = *static_cast<Item*>(c->data);
  if (!ev.timedout && !c->close) {
    // Readable while idle: the backend closed it, reset it, or sent bytes that
    // belong to no request. Only "nothing there after all" keeps it.
    char b;
    long n = ::recv(c->fd, &b, 1, MSG_PEEK);
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ev.ready = 0;
      if (c->loop->handle_read_event(ev, 0)) return;
    }
  }
  ev.timedout = 0;
  close_item(item);
}

}  // namespace

Connection* keepalive_take(EventLoop& loop, Group& group, const Peer& peer, const void* key,
                           Msec& born) {
  GroupCache* gc = cache_of(loop, group, false);
  if (gc == nullptr) return nullptr;
  for (Item* i = gc->cached.head.next; i != &gc->cached.head; i = i->next) {
    if (i->peer != &peer || i->key != key) continue;
    Connection* c = i->c;
    born = i->born;
    List::unlink(*i);
    gc->free.push_front(*i);
    --gc->count;
    i->c = nullptr;
    i->peer = nullptr;
    loop.pool().reusable(*c, false);
    loop.del_timer(*c->read);
    c->data = nullptr;
    c->read->handler = dummy_handler;
    c->write->handler = dummy_handler;
    return c;
  }
  return nullptr;
}

bool keepalive_put(EventLoop& loop, Group& group, Peer& peer, Connection& c, const void* key,
                   Msec born) {
  GroupCache* gc = cache_of(loop, group, true);
  if (gc == nullptr) return false;
  if (gc->free.empty()) close_item(*gc->cached.head.prev);  // the least recently used
  Item& item = *gc->free.head.next;
  List::unlink(item);
  gc->cached.push_front(item);
  ++gc->count;
  item.c = &c;
  item.peer = &peer;
  item.key = key;
  item.born = born;

  c.data = &item;
  c.log = &loop.log();
  c.read->handler = close_handler;
  c.write->handler = dummy_handler;
  loop.del_timer(*c.write);
  loop.del_timer(*c.read);
  loop.add_timer(*c.read, group.keepalive_timeout);
  // Level-triggered backends: stop watching writability (it would wake the
  // loop for nothing), keep watching the read side.
  Status st = Status::ok();
  if (!(loop.capabilities() & kCapClear) && c.write->active) {
    st = loop.backend().del(*c.write, kEvLevel);
  }
  if (st) st = loop.handle_read_event(*c.read, 0);
  if (!st) {
    VIGIL_LOG(loop.log(), kAlert, st.err(), "%s", st.message().c_str());
    close_item(item);
    return true;  // closed here: the caller has nothing left to close
  }
  loop.pool().reusable(c, true);
  if (c.read->ready) close_handler(*c.read);  // something arrived already
  return true;
}

void close_keepalive(EventLoop& loop) {
  LoopCaches* lc = caches(loop, false);
  if (lc == nullptr) return;
  for (auto& gc : lc->groups) {
    while (!gc->cached.empty()) close_item(*gc->cached.head.next);
  }
  loop.drop_context<LoopCaches>(&kContextKey);
}

std::size_t keepalive_cached(EventLoop& loop, const Group& group) {
  GroupCache* gc = cache_of(loop, group, false);
  return gc == nullptr ? 0 : gc->count;
}

}  // namespace vigil::upstream
