// The HTTP/2 mode's client session (h2_test_client.h): HTTP/1.1 requests in,
// HTTP/2 streams out, with libnghttp2's client session driven over a
// blocking socket.

#include "integration/http_harness.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vigil::test {

bool h2_test_mode() {
  const char* v = std::getenv("VIGIL_TEST_H2");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// The nghttp2 client session behind H2TestClient.
class H2TestClient::Session {
 public:
  explicit Session(int fd) : fd_(fd) {
    nghttp2_session_callbacks* cb = nullptr;
    if (nghttp2_session_callbacks_new(&cb) != 0) return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    const int rv = nghttp2_session_client_new(&ng_, cb, this);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0) {
      ng_ = nullptr;
      return;
    }
    // Large windows: a test's body should not wait on WINDOW_UPDATEs.
    const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    if (nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0, 1 << 30) != 0) {
      broken_ = true;
    }
  }
  ~Session() {
    if (ng_ != nullptr) nghttp2_session_del(ng_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool send(std::string_view bytes) {
    if (ng_ == nullptr || broken_) return false;
    if (!untranslatable_) {
      in_.append(bytes);
      translate();
    }
    return flush();
  }

  Response read_response(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    if (streams_.empty()) return {};
    Stream& s = *streams_.front();
    while (s.interim.empty() && !s.closed) {
      if (!pump(deadline)) break;
    }
    if (!s.interim.empty()) {
      Response r = std::move(s.interim.front());
      s.interim.pop_front();
      return r;
    }
    Response r = s.response;
    if (!s.closed) return r;  // in time or not, what came
    r.complete = s.have_head && s.ended;
    // Kept: the rest of its body may still come from the test.
    done_.push_back(std::move(streams_.front()));
    streams_.pop_front();
    return r;
  }

 private:
  struct Stream {
    // The request body not yet given to nghttp2, and whether it is all here.
    std::string upload;
    std::size_t upload_at = 0;
    bool upload_done = false;
    bool deferred = false;
    int32_t id = -1;
    // The response: the head block being read, the final response, and the
    // interim ones before it.
    int block_status = 0;
    std::string block;
    bool have_head = false;
    Response response;
    std::deque<Response> interim;
    bool ended = false;  // END_STREAM received
    bool closed = false;
  };

  // Turns the complete parts of in_ into streams and body bytes.
  void translate() {
    for (;;) {
      if (body_ != nullptr) {
        if (!take_body()) return;
        continue;
      }
      while (in_.compare(0, 2, "\r\n") == 0) in_.erase(0, 2);
      const std::size_t end = in_.find("\r\n\r\n");
      if (end == std::string::npos) return;
      const std::string head = in_.substr(0, end + 2);
      in_.erase(0, end + 4);
      if (!submit(head)) {
        // The framing of what follows is unknown: nothing more is sent.
        auto s = std::make_unique<Stream>();
        s->closed = true;
        streams_.push_back(std::move(s));
        untranslatable_ = true;
        in_.clear();
        return;
      }
    }
  }

  static std::string lower(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  }

  // One request head (ending in CRLF) as a stream; false when HTTP/2 cannot
  // say it.
  bool submit(const std::string& head) {
    std::size_t eol = head.find("\r\n");
    const std::string line = head.substr(0, eol);
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) return false;
    const std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
    if (method == "CONNECT" || target.empty()) return false;
    std::string scheme = "http", authority;
    bool have_authority = false;
    if (target[0] != '/' && target != "*") {
      // The absolute form: its authority is the request's (RFC 9112 §3.2.2).
      const std::size_t colon = target.find("://");
      if (colon == std::string::npos) return false;
      scheme = lower(target.substr(0, colon));
      const std::size_t path = target.find('/', colon + 3);
      authority = target.substr(colon + 3, path == std::string::npos ? path : path - colon - 3);
      have_authority = true;
      target = path == std::string::npos ? "/" : target.substr(path);
    }
    std::vector<std::pair<std::string, std::string>> fields;
    bool chunked = false;
    long long length = -1;
    while (eol + 2 < head.size()) {
      const std::size_t at = eol + 2;
      eol = head.find("\r\n", at);
      const std::string field = head.substr(at, eol - at);
      const std::size_t colon = field.find(':');
      if (colon == std::string::npos || colon == 0) return false;
      std::string name = lower(field.substr(0, colon));
      std::size_t v = field.find_first_not_of(" \t", colon + 1);
      std::string value = v == std::string::npos ? "" : field.substr(v);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
      if (name == "host") {
        if (!have_authority) authority = value;
        have_authority = true;
        continue;
      }
      if (name == "transfer-encoding") {
        if (lower(value) != "chunked") return false;
        chunked = true;
        continue;
      }
      if (name == "content-length") {
        char* stop = nullptr;
        length = std::strtoll(value.c_str(), &stop, 10);
        if (value.empty() || *stop != '\0' || length < 0) return false;
      }
      if (name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
          name == "upgrade" || (name == "te" && lower(value) != "trailers")) {
        continue;
      }
      fields.emplace_back(std::move(name), std::move(value));
    }
    if (chunked) {
      // Chunked wins over Content-Length (RFC 9112 §6.3).
      fields.erase(std::remove_if(fields.begin(), fields.end(),
                                  [](const auto& f) { return f.first == "content-length"; }),
                   fields.end());
      length = -1;
    }
    std::vector<nghttp2_nv> nv;
    auto add = [&nv](const std::string& name, const std::string& value) {
      nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE});
    };
    const std::string k_method = ":method", k_scheme = ":scheme", k_authority = ":authority",
                      k_path = ":path";
    add(k_method, method);
    add(k_scheme, scheme);
    if (have_authority) add(k_authority, authority);
    add(k_path, target);
    for (const auto& f : fields) add(f.first, f.second);

    auto s = std::make_unique<Stream>();
    Stream* st = s.get();
    const bool has_body = chunked || length > 0;
    nghttp2_data_provider provider{};
    provider.source.ptr = st;
    provider.read_callback = read_body;
    st->id = nghttp2_submit_request(ng_, nullptr, nv.data(), nv.size(),
                                    has_body ? &provider : nullptr, st);
    if (st->id < 0) return false;
    streams_.push_back(std::move(s));
    if (has_body) {
      body_ = st;
      chunked_ = chunked;
      left_ = chunked ? 0 : static_cast<std::size_t>(length);
      chunk_state_ = ChunkState::kSize;
    }
    return true;
  }

  enum class ChunkState { kSize, kData, kDataEnd, kTrailers };

  // Moves the body bytes of in_ to the stream being sent; false when more
  // bytes are needed (or the chunked framing is broken).
  bool take_body() {
    Stream& s = *body_;
    if (!chunked_) {
      const std::size_t n = std::min(left_, in_.size());
      s.upload.append(in_, 0, n);
      in_.erase(0, n);
      left_ -= n;
      if (left_ == 0) finish_body();
      resume(s);
      return left_ == 0;
    }
    for (;;) {
      if (chunk_state_ == ChunkState::kData) {
        const std::size_t n = std::min(left_, in_.size());
        s.upload.append(in_, 0, n);
        in_.erase(0, n);
        left_ -= n;
        resume(s);
        if (left_ != 0) return false;
        chunk_state_ = ChunkState::kDataEnd;
        continue;
      }
      const std::size_t eol = in_.find("\r\n");
      if (eol == std::string::npos) return false;
      const std::string line = in_.substr(0, eol);
      in_.erase(0, eol + 2);
      if (chunk_state_ == ChunkState::kDataEnd) {
        if (!line.empty()) return broken_body();
        chunk_state_ = ChunkState::kSize;
      } else if (chunk_state_ == ChunkState::kTrailers) {
        if (line.empty()) {  // trailer fields are dropped
          finish_body();
          resume(s);
          return true;
        }
      } else {
        char* stop = nullptr;
        const unsigned long long size = std::strtoull(line.c_str(), &stop, 16);
        if (stop == line.c_str()) return broken_body();
        if (size == 0) {
          chunk_state_ = ChunkState::kTrailers;
        } else {
          left_ = static_cast<std::size_t>(size);
          chunk_state_ = ChunkState::kData;
        }
      }
    }
  }

  void finish_body() {
    body_->upload_done = true;
    body_ = nullptr;
  }

  bool broken_body() {
    // The stream is reset: the test gets no response for it.
    nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, body_->id, NGHTTP2_CANCEL);
    body_ = nullptr;
    untranslatable_ = true;
    in_.clear();
    return false;
  }

  void resume(Stream& s) {
    if (s.deferred && s.id > 0) {
      s.deferred = false;
      nghttp2_session_resume_data(ng_, s.id);
    }
  }

  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source* source, void*) {
    Stream& s = *static_cast<Stream*>(source->ptr);
    const std::size_t n = std::min(length, s.upload.size() - s.upload_at);
    std::memcpy(buf, s.upload.data() + s.upload_at, n);
    s.upload_at += n;
    if (s.upload_at == s.upload.size()) {
      s.upload.clear();
      s.upload_at = 0;
      if (s.upload_done) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
      }
    }
    if (n == 0) {
      s.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  // Writes what nghttp2 has to send.
  bool flush() {
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(ng_, &data);
      if (n < 0) return !(broken_ = true);
      if (n == 0) return true;
      if (!send_all(fd_, std::string_view(reinterpret_cast<const char*>(data),
                                          static_cast<std::size_t>(n)))) {
        return !(broken_ = true);
      }
    }
  }

  // One read before `deadline` through the session; false on timeout, EOF
  // or a connection error (the streams not closed then end unfinished).
  bool pump(std::chrono::steady_clock::time_point deadline) {
    if (broken_ || ng_ == nullptr) return false;
    const auto left = ms_left(deadline);
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0 ||
        nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(tmp),
                                 static_cast<std::size_t>(n)) < 0 ||
        !flush()) {
      broken_ = true;
      for (auto& s : streams_) s->closed = true;
      return false;
    }
    return true;
  }

  static Stream* stream_of(nghttp2_session* ng, int32_t id) {
    return static_cast<Stream*>(nghttp2_session_get_stream_user_data(ng, id));
  }

  static int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void*) {
    if (Stream* s = stream_of(ng, frame->hd.stream_id)) {
      s->block_status = 0;
      s->block.clear();
    }
    return 0;
  }

  static int on_header(nghttp2_session* ng, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void*) {
    Stream* s = stream_of(ng, frame->hd.stream_id);
    if (s == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      s->block_status = std::atoi(std::string(v).c_str());
    } else {
      s->block.append(n).append(": ").append(v).append("\r\n");
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* ng, const nghttp2_frame* frame, void*) {
    Stream* s = stream_of(ng, frame->hd.stream_id);
    if (s == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !s->have_head && s->block_status != 0) {
      Response r;
      r.head = "HTTP/1.1 " + std::to_string(s->block_status) + " \r\n" + s->block + "\r\n";
      parse_response_head(r);
      if (s->block_status < 200) {
        r.complete = true;
        s->interim.push_back(std::move(r));
      } else {
        s->response = std::move(r);
        s->have_head = true;
      }
    }
    // Trailer fields (a later HEADERS) are dropped, as Client drops them.
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      s->ended = true;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data,
                           size_t len, void*) {
    if (Stream* s = stream_of(ng, id)) {
      s->response.body.append(reinterpret_cast<const char*>(data), len);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* ng, int32_t id, uint32_t, void*) {
    if (Stream* s = stream_of(ng, id)) s->closed = true;
    return 0;
  }

  int fd_;
  nghttp2_session* ng_ = nullptr;
  bool broken_ = false;
  bool untranslatable_ = false;
  std::string in_;                               // HTTP/1.1 bytes not yet translated
  std::deque<std::unique_ptr<Stream>> streams_;  // in the order of the requests
  std::vector<std::unique_ptr<Stream>> done_;    // their responses read
  Stream* body_ = nullptr;                       // the stream whose body is being sent
  bool chunked_ = false;
  std::size_t left_ = 0;
  ChunkState chunk_state_ = ChunkState::kSize;
};

H2TestClient::H2TestClient(int fd) : session_(std::make_unique<Session>(fd)) {}
H2TestClient::~H2TestClient() = default;
bool H2TestClient::send(std::string_view bytes) { return session_->send(bytes); }
Response H2TestClient::read_response(int timeout_ms) { return session_->read_response(timeout_ms); }

}  // namespace vigil::test
