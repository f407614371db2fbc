#pragma once
// Subrequests (nginx's ngx_http_subrequest): a request a module starts from
// inside another one, to run a local URI through the phases and use its
// response (auth_request; later ssi's includes, mirror).
//
// A subrequest is a Request of its own, taken from the worker's free list,
// that shares its parent's connection, server, request line and header
// fields (views into the parent's buffers, which outlive it). It has no
// body (the parent's is left unread) and is a GET, as nginx's. It starts at
// server-rewrite with its URI, as an internal redirect does, so an
// `internal` location answers it; the access phase is skipped for it and
// the pre-access limits apply once per client request (as nginx's).
//
// Its response does not go to the client: send_header and output_filter of
// a subrequest call its parent's hooks instead of the header filters and
// HTTP/1's writers, so the parent decides what becomes of the head and the
// body (auth_request keeps the head, drops the body). When the subrequest
// ends (finalize_request, finalize_error and terminate_request all come to
// it), it writes no access log line and closes nothing: it posts its
// parent's `sub_done` event, whose handler resumes the parent (hooks.done;
// auth_request runs the parent's phases again from the step that waited).
// The parent reads the subrequest's result (status, headers_out, its
// upstream's fields for $upstream_http_*) and then releases it.
//
// Lifetime: the client connection's events keep going to the parent (the
// transport calls hc->request, the main request). If the client goes away
// while a subrequest runs, the parent is ended as usual, and releasing it
// releases its subrequest first (its upstream connection closed, its
// buffers back in the cache) and takes its `sub_done` off the posted queue;
// the handler also checks the connection's generation, so a stale posting
// can never reach a reused Request.

#include <cstdint>
#include <string_view>

namespace vigil {
struct Chain;
}

namespace vigil::http {

struct Request;

struct SubrequestHooks {
  // The subrequest's head is complete (sr.headers_out): 0, or a status that
  // the subrequest's handler answers instead.
  int (*header)(Request& sr);
  // A piece of its body, as output_filter's contract (filters.h): the hook
  // consumes the buffers (or keeps them until it has) and returns kBodyOk,
  // kBodyAgain or kBodyError.
  int (*body)(Request& sr, Chain* in);
  // The subrequest has ended: resume the parent (run from the posted queue,
  // never from inside the subrequest's own handlers).
  void (*done)(Request& parent);
};

// Subrequests nested in one another (nginx's NGX_HTTP_MAX_SUBREQUESTS).
inline constexpr std::uint8_t kMaxSubrequestDepth = 50;

// Starts a subrequest of `parent` for `uri` (no arguments) and runs its
// phases until it waits or ends. The parent must return kPhaseSuspended (or
// otherwise wait) and is resumed through hooks.done. Null when it could not
// be made (no memory, or nested too deep: logged), the parent then answers
// 500. A parent waits for one subrequest at a time.
Request* start_subrequest(Request& parent, std::string_view uri, const SubrequestHooks& hooks);

// The subrequest ended (finalize_request of a subrequest): post its parent's
// resumption.
void subrequest_ended(Request& sr);

// Gives back a subrequest the parent is done with (or is abandoning: a
// subrequest still running is ended without its parent hearing of it).
void release_subrequest(Request& parent);

// Hooks that keep the head and drop the body (auth_request's).
int subrequest_keep_header(Request& sr);
int subrequest_discard_body(Request& sr, Chain* in);

}  // namespace vigil::http
