#pragma once
// The request body, for whoever takes it (nginx's
// ngx_http_read_client_request_body and ngx_http_discard_request_body): a
// handler reads it into one buffer, or throws it away. The functions take the
// request, never its connection: HTTP/1 implements them over the client
// socket (http/v1/request_body.cc); HTTP/2 will feed the same buffer from a
// stream's DATA frames.
//
// Reading (the proxy; any handler that uses the body):
//
//   start_request_body(r, size, handler)   one buffer of `size` bytes
//                                          (client_body_buffer_size) from
//                                          the worker's cache, in r.body.buf
//   read_request_body(r)                   moves what has arrived into
//                                          r.body.buf [last, end):
//     1   r.body.buf holds bytes, or the body is complete (r.body.done)
//     0   waiting: handler(r) runs when more may have arrived
//    -1   failed: r.body.status says why; the caller ends the request
//
// The caller consumes [pos, last). Once it has consumed all of it, it sets
// pos = last = start and reads again: the buffer is refilled from its start
// (streaming, proxy_request_buffering off). The body never needs more memory
// than the buffer; the caller decides whether to wait until it is full (read
// ahead) or to pass each piece on.
//
// handler(r) also runs when reading fails outside read_request_body (the
// client timed out, 408; the connection is closing, status 0): r.body.failed
// is then set. The buffer goes back to the cache when the request ends.
//
// Content-Length and chunked bodies alike: the data arrives decoded, the
// sum of the chunks is held to client_max_body_size (413), a malformed
// chunked body is 400, bytes after a chunked body (a pipelined request) stay
// for the next request. "100 Continue" is sent (send_continue) when the body
// is first read from the client.

#include <sys/types.h>

#include <cstdint>

#include "codec/chunked.h"
#include "vigil/core/buffer.h"
#include "vigil/event/event.h"

namespace vigil::http {

struct Request;

// Called when the body reader has news: more bytes may be read, or reading
// failed (r.body.failed).
using RequestBodyHandler = void (*)(Request& r);

// A request's body state, inside the Request (no memory of its own but the
// buffer).
struct RequestBody {
  Buf buf;                    // the body bytes read and not consumed: [pos, last)
  // The body's temporary file (request_body_file.cc), when it has one: the
  // descriptor, its name (a worker buffer, NUL-terminated), the bytes
  // written, and, once all of it is there, the whole body as a file range.
  int file_fd = -1;
  char* file_name = nullptr;
  std::uint32_t file_name_size = 0;
  std::uint32_t file_name_len = 0;
  bool file_keep = false;  // client_body_in_file_only on: not removed with the request
  off_t file_size = 0;
  Buf file;  // in_file, [file_pos, file_last): the whole body (request_body_done_in_file)
  std::uint32_t size = 0;     // buf's memory, a worker cache buffer of this size
  std::int64_t rest = 0;      // Content-Length bytes still to come
  std::int64_t received = 0;  // body bytes read into buf so far (decoded)
  ChunkedParser chunked;
  RequestBodyHandler handler = nullptr;
  int status = 0;            // why reading failed: 400, 408, 413, 500 (0: the connection closes)
  bool chunked_in = false;   // the client sends it chunked
  bool started = false;      // start_request_body was called: a handler takes the body
  bool done = true;          // all of the body has been read (none: done from the start)
  bool failed = false;       // reading ended with `status`
  bool client_gone = false;  // ... and the client cannot be answered (timed out, closed)
  bool discarded = false;    // the body was read and thrown away
};

// The request's head declares a body (Content-Length over 0, or chunked).
bool has_request_body(const Request& r);

// Starts reading the body of `r` into a buffer of `size` bytes; `handler`
// runs as above. 0, or 500 when no buffer could be had. A request without a
// body is done at once (and takes no buffer).
int start_request_body(Request& r, std::size_t size, RequestBodyHandler handler);

// Reads on, as above: 1, 0 or -1.
int read_request_body(Request& r);

// ---- request_body_file.cc: a body read ahead into a temporary file -----------------------
//
// A reader that wants the whole body before it goes on (the proxy with
// request buffering) and has filled its buffer writes it to a file in the
// location's client_body_temp_path and reads on into the emptied buffer;
// client_body_in_file_only puts every body there. Once the body is complete
// what is left in the buffer is written too, and r.body.file is the whole
// body ($request_body_file names the file). The file is closed when the
// request ends, and removed unless client_body_in_file_only is on.

// The location wants every body in a file (client_body_in_file_only on|clean).
bool request_body_in_file_only(const Request& r);
// Appends r.body.buf [pos, last) to the body's file (made on the first
// call) and empties the buffer. False when the file cannot be made or
// written (logged): the request ends with 500.
bool request_body_write(Request& r);
// The body is complete and written: r.body.file is all of it.
void request_body_done_in_file(Request& r);
// Where the body to send is: r.body.file when it is in a file, else r.body.buf.
Buf& request_body_data(Request& r);
// Closes the body's file (and removes it unless it is kept); request end.
void release_request_body_file(Request& r);

// Reads and throws away the request body (a handler that answers without
// one calls it first, so the connection can be kept). kPhaseNext: no body
// is left; kPhaseSuspended: it is being read and run_phases(r) enters the
// calling step again once it is gone (or the request ended with an error,
// answered here: 400, 413; or closed: 408, the client gone).
int discard_request_body(Request& r);

}  // namespace vigil::http
