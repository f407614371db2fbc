// An HTTP/1.1 client on libvigil's PeerConnection: one GET, with a connect
// timeout and a read timeout, on one event loop. Prints the status line's
// code ("status 200") and then the body; exits 0 for a complete 2xx/3xx
// response, 1 otherwise (refused, timed out, bad response, 4xx/5xx).
//
//   http_client http://127.0.0.1:8080/path [connect_timeout_ms] [read_timeout_ms] [backend]
//
// Only IP addresses (and "localhost"): an event loop must not block on a
// resolver.
#include <arpa/inet.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "vigil/vigil.h"

using namespace vigil;

namespace {

constexpr std::size_t kMaxResponse = 16 << 20;

struct Fetch {
  EventLoop* loop = nullptr;
  PeerConnection pc;
  std::string host;  // for the Host header
  std::string path;
  std::string request;
  std::size_t sent = 0;
  std::string response;
  Msec connect_timeout = 3000;
  Msec read_timeout = 5000;
  int status = 0;     // the status code, once the head is in
  int exit_code = 1;  // what main returns
};

Fetch& fetch_of(Event& ev) {
  return *static_cast<Fetch*>(ev.owner<Connection>()->loop->data());
}

// Ends the fetch: closes the connection (its timers go with it) and stops the loop.
void finish(Fetch& f, int code, const char* error = nullptr) {
  if (error != nullptr) std::fprintf(stderr, "http_client: %s\n", error);
  if (f.pc.connection != nullptr) {
    close_connection(*f.pc.connection);
    f.pc.connection = nullptr;  // the slot is reused: keep no pointer to it
  }
  f.exit_code = code;
  f.loop->stop();
}

// The response is complete when the connection closed (Connection: close)
// or when Content-Length bytes of body are in.
bool complete(Fetch& f, bool eof) {
  const std::size_t head_end = f.response.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  if (f.status == 0) {
    if (f.response.compare(0, 7, "HTTP/1.") != 0 || f.response.size() < 12) return false;
    f.status = std::atoi(f.response.c_str() + 9);
  }
  const std::size_t body = head_end + 4;
  std::string head = f.response.substr(0, body);
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::size_t cl = head.find("\r\ncontent-length:");
  if (cl != std::string::npos) {
    const std::size_t want = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    return f.response.size() >= body + want;
  }
  return eof;
}

void print_and_finish(Fetch& f) {
  const std::size_t body = f.response.find("\r\n\r\n") + 4;
  std::printf("status %d\n", f.status);
  std::fwrite(f.response.data() + body, 1, f.response.size() - body, stdout);
  finish(f, f.status >= 200 && f.status < 400 ? 0 : 1);
}

void on_read(Event& rev) {
  Fetch& f = fetch_of(rev);
  Connection& c = *f.pc.connection;
  if (rev.timedout) return finish(f, 1, "read timed out");
  char buf[16384];
  for (;;) {
    long n = c.recv(c, buf, sizeof buf);
    if (n == kIoAgain) break;
    if (n < 0) return finish(f, 1, "recv() failed");
    if (n == 0) {
      if (complete(f, true) && f.status != 0) return print_and_finish(f);
      return finish(f, 1, "the server closed the connection before a whole response");
    }
    f.response.append(buf, static_cast<std::size_t>(n));
    if (f.response.size() > kMaxResponse) return finish(f, 1, "response too large");
    if (complete(f, false)) return print_and_finish(f);
  }
  // Waiting for more: the read timeout runs again from now.
  f.loop->add_timer(rev, f.read_timeout);
  if (!f.loop->handle_read_event(rev)) finish(f, 1, "cannot wait for the response");
}

void on_write(Event& wev) {
  Fetch& f = fetch_of(wev);
  Connection& c = *f.pc.connection;
  if (wev.timedout) return finish(f, 1, f.sent == 0 ? "connect timed out" : "send timed out");
  if (f.sent == 0 && f.response.empty()) {
    if (int err = peer_connect_result(c); err != 0) {
      std::string why = "connect() failed: " + std::string(std::strerror(err));
      return finish(f, 1, why.c_str());
    }
  }
  f.loop->del_timer(wev);  // connected: the connect timeout is over
  while (f.sent < f.request.size()) {
    long n = c.send(c, f.request.data() + f.sent, f.request.size() - f.sent);
    if (n == kIoAgain) {
      f.loop->add_timer(wev, f.read_timeout);
      if (!f.loop->handle_write_event(wev)) finish(f, 1, "cannot wait to send");
      return;
    }
    if (n <= 0) return finish(f, 1, "send() failed");
    f.sent += static_cast<std::size_t>(n);
  }
  // All sent: stop watching writability (level-triggered backends would
  // report it on every pass), and wait for the answer.
  wev.handler = [](Event&) {};
  if (!f.loop->handle_write_event(wev)) return finish(f, 1, "cannot stop write events");
  c.read->handler = on_read;
  f.loop->add_timer(*c.read, f.read_timeout);
  if (c.read->ready) return on_read(*c.read);
  if (!f.loop->handle_read_event(*c.read)) finish(f, 1, "cannot wait for the response");
}

// "http://HOST:PORT/path" -> address, Host header, path.
bool parse_url(const std::string& url, Fetch& f) {
  if (url.rfind("http://", 0) != 0) return false;
  const std::size_t slash = url.find('/', 7);
  const std::string authority = url.substr(7, slash == std::string::npos ? slash : slash - 7);
  f.path = slash == std::string::npos ? "/" : url.substr(slash);
  const std::size_t colon = authority.rfind(':');
  std::string host = authority.substr(0, colon);
  const int port = colon == std::string::npos ? 80 : std::atoi(authority.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  if (host == "localhost") host = "127.0.0.1";
  auto* sin = reinterpret_cast<sockaddr_in*>(&f.pc.addr);
  if (::inet_pton(AF_INET, host.c_str(), &sin->sin_addr) != 1) return false;
  sin->sin_family = AF_INET;
  sin->sin_port = htons(static_cast<std::uint16_t>(port));
  f.pc.addrlen = sizeof(sockaddr_in);
  f.pc.name = authority;
  f.host = authority;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Fetch f;
  if (argc < 2 || !parse_url(argv[1], f)) {
    std::fprintf(stderr,
                 "usage: http_client http://IP:PORT/path [connect_timeout_ms] "
                 "[read_timeout_ms] [backend]\n");
    return 1;
  }
  if (argc > 2) f.connect_timeout = static_cast<Msec>(std::atol(argv[2]));
  if (argc > 3) f.read_timeout = static_cast<Msec>(std::atol(argv[3]));
  f.request = "GET " + f.path + " HTTP/1.1\r\nHost: " + f.host +
              "\r\nUser-Agent: vigil-http-client/" + version_string() +
              "\r\nConnection: close\r\n\r\n";

  EventLoopConfig cfg;
  cfg.use = argc > 4 ? argv[4] : "";
  cfg.connections = 4;
  auto created = EventLoop::create(cfg, Log::global());
  if (!created) {
    std::fprintf(stderr, "http_client: %s\n", created.status().to_string().c_str());
    return 1;
  }
  EventLoop& loop = *created.value();
  f.loop = &loop;
  loop.set_data(&f);

  // kPeerOk: connected at once; kPeerAgain: the connect completes (or fails)
  // as a write event; anything else: nothing to wait for.
  const int rc = event_connect_peer(loop, f.pc);
  if (rc != kPeerOk && rc != kPeerAgain) {
    std::fprintf(stderr, "http_client: cannot connect to %s\n", f.pc.name.c_str());
    return 1;
  }
  Connection& c = *f.pc.connection;
  c.write->handler = on_write;
  c.read->handler = [](Event&) {};  // nothing to read before the request is sent
  if (rc == kPeerOk) {
    on_write(*c.write);
  } else {
    loop.add_timer(*c.write, f.connect_timeout);
  }
  if (!loop.stopping()) loop.run();
  std::fflush(stdout);
  return f.exit_code;
}
