#pragma once
// The HTTP/2 mode of the HTTP integration tests (VIGIL_TEST_H2=1): what a
// test writes as HTTP/1.1 goes out as HTTP/2 streams, with prior knowledge
// on a clear port (the server has `http2 on`), and each stream's response
// comes back in the Response the tests already read. The requests are
// parsed from the bytes sent (request line, fields, a Content-Length or a
// chunked body, possibly over several sends); each becomes a stream
// (RFC 9113 §8.3.1 pseudo-fields, the connection-specific fields of §8.2.2
// dropped, the body as DATA) and the responses are returned in the order of
// the requests, as an HTTP/1.1 connection would. What cannot be said in
// HTTP/2 (a malformed request on purpose, CONNECT, a protocol other than
// HTTP/1.x) gets no response: the suites that send it do not run in this
// mode (CMakeLists.txt, the "/h2" run).
//
// Declared here for http_harness.h (after Response); the session is in
// h2_test_client.cc, linked into every integration test group.

#include <memory>
#include <string_view>

namespace vigil::test {

// True when VIGIL_TEST_H2 asks for the HTTP/2 mode.
bool h2_test_mode();

// One client connection speaking HTTP/2 for a test that writes HTTP/1.1.
class H2TestClient {
 public:
  // `fd` stays the caller's (Client closes it).
  explicit H2TestClient(int fd);
  ~H2TestClient();
  H2TestClient(const H2TestClient&) = delete;
  H2TestClient& operator=(const H2TestClient&) = delete;

  // Takes HTTP/1.1 bytes: every request they complete becomes a stream (a
  // body goes out as it arrives). False when the connection failed.
  bool send(std::string_view bytes);
  // The next response, in the order of the requests: an interim (1xx) one
  // on its own, as HTTP/1.1 sends it; complete when its stream ended.
  Response read_response(int timeout_ms);

 private:
  class Session;
  std::unique_ptr<Session> session_;
};

}  // namespace vigil::test
