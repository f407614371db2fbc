#pragma once
// Posted event queues (seed 001 "Posted 事件队列"): events whose handlers run
// later in the same loop iteration. Intrusive: posting allocates nothing, and
// posting an already posted event does nothing.

#include <cstddef>

#include "vigil/event/event.h"

namespace vigil {

class PostedQueue {
 public:
  PostedQueue() { head_.prev = head_.next = &head_; }
  PostedQueue(const PostedQueue&) = delete;
  PostedQueue& operator=(const PostedQueue&) = delete;

  bool empty() const { return head_.next == &head_; }

  // Appends ev unless it is already posted (in any queue).
  void post(Event& ev) {
    if (ev.posted) return;
    ev.posted = 1;
    ev.queue.prev = head_.prev;
    ev.queue.next = &head_;
    head_.prev->next = &ev.queue;
    head_.prev = &ev.queue;
  }

  // Removes a posted event from whichever queue holds it.
  static void remove(Event& ev) {
    if (!ev.posted) return;
    ev.queue.prev->next = ev.queue.next;
    ev.queue.next->prev = ev.queue.prev;
    ev.queue.prev = ev.queue.next = nullptr;
    ev.posted = 0;
  }

  Event* front() const { return empty() ? nullptr : Event::from_queue(head_.next); }

  // Runs handlers until the queue is empty (events posted meanwhile run too).
  // Returns how many handlers ran.
  std::size_t process() {
    std::size_t n = 0;
    while (!empty()) {
      Event* ev = Event::from_queue(head_.next);
      remove(*ev);
      ++n;
      ev->handler(*ev);
    }
    return n;
  }

  // Moves every event to the tail of `to`, marking each ready with unknown
  // available bytes (nginx's ngx_event_move_posted_next).
  void move_all_ready(PostedQueue& to) {
    for (QueueNode* q = head_.next; q != &head_; q = q->next) {
      Event* ev = Event::from_queue(q);
      ev->ready = 1;
      ev->available = -1;
    }
    if (empty()) return;
    head_.next->prev = to.head_.prev;
    to.head_.prev->next = head_.next;
    head_.prev->next = &to.head_;
    to.head_.prev = head_.prev;
    head_.prev = head_.next = &head_;
  }

 private:
  QueueNode head_;
};

}  // namespace vigil
