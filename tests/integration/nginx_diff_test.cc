// Differential conformance: the same raw requests to real nginx and to Vigil,
// configured alike on one document root, and their answers compared.
//
// Each case is sent as raw bytes on a fresh TCP connection. What is compared
// (the digest below): per response, the status; Content-Length (for 2xx and
// 304; for other statuses only its presence, error pages name the server);
// Content-Type, Content-Range, Location, Allow, Transfer-Encoding,
// Connection, ETag, Last-Modified, Accept-Ranges; whether a "100 Continue"
// came first; the body of 2xx and 304 responses (and of an HTTP/0.9
// answer), and for other statuses whether there is a page; then what became
// of the connection: "closed", or "open" when one more request on it is
// served as it should be (a server that misread where the request ended
// answers that probe wrongly).
//
// nginx's status for each case is in the table too, so a case that stops
// testing what it says (another nginx) fails loudly. Kept differences are
// listed per case with the reason: Vigil follows the RFC where nginx does
// not. Each names the digest line, nginx's value and Vigil's, so the test
// fails when either side changes. docs/directives.md ("Where Vigil and nginx
// differ") lists them for users. One more is configured away: both run
// with `absolute_redirect off`, since the two listen on different ports and
// an absolute Location names the port. Error page texts are not compared (they name the server).
//
// NGINX_DIFF_VERBOSE=1 prints both digests of every case. nginx must be
// installed (/usr/sbin/nginx; CI installs nginx-light): without it the test
// fails, it does not skip.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nginx_diff.h"

namespace vigil {
namespace {

using test::NginxServer;
using test::RawClient;
using test::RawReply;
using test::VigilServer;

constexpr int kReplyTimeoutMs = 3000;

// Every file's mtime, so the validators in the table are constants:
// Tue, 02 Jan 2024 03:04:05 GMT.
constexpr std::time_t kMtime = 1704164645;
constexpr char kDate[] = "Tue, 02 Jan 2024 03:04:05 GMT";
constexpr char kEarlier[] = "Mon, 01 Jan 2024 00:00:00 GMT";
constexpr char kLater[] = "Wed, 03 Jan 2024 00:00:00 GMT";
constexpr char kA[] = "hello, world\n";      // /a.txt, 13 bytes
constexpr char kETagA[] = "\"65937d25-d\"";  // nginx's "mtime-size" in hex
constexpr std::size_t kBigSize = 100000;     // /big.bin
constexpr int kRaw = 9;  // Case::status of an answer without a status line (HTTP/0.9)

// A documented difference: the digest line `key`, nginx's value and Vigil's
// ("" for absent, "*" for any value).
struct Kept {
  std::string key;
  std::string nginx;
  std::string vigil;
};

struct Case {
  std::string name;
  std::string request;     // the raw bytes
  int status;              // nginx's status of the first response
  int replies = 1;         // responses to read (pipelined requests)
  std::string heads = "";  // per response, 'H' when it answers a HEAD
  std::string then = "";   // sent after a "100 Continue" (or 1 s without one)
  std::vector<Kept> kept = {};
  std::string why = "";  // the reason for the kept differences
};

// ---- request builders -----------------------------------------------------

std::string req(const std::string& line, const std::string& fields = "") {
  return line + "\r\nHost: localhost\r\n" + fields + "\r\n";
}
std::string get(const std::string& target, const std::string& fields = "") {
  return req("GET " + target + " HTTP/1.1", fields);
}
std::string head(const std::string& target, const std::string& fields = "") {
  return req("HEAD " + target + " HTTP/1.1", fields);
}

// ---- the digest -------------------------------------------------------------

using Digest = std::map<std::string, std::string>;

std::string describe_body(const std::string& body) {
  bool text = body.size() <= 80;
  for (unsigned char ch : body) text = text && (ch >= 0x20 || ch == '\n') && ch < 0x7f;
  if (text) {
    std::string out = "\"";
    for (char ch : body) out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
    return out + "\"";
  }
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : body) h = (h ^ ch) * 1099511628211ull;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes, fnv1a %016llx", body.size(),
                static_cast<unsigned long long>(h));
  return buf;
}

// A multipart/byteranges answer's boundary is chosen per response: the same
// name stands for it on both sides, in Content-Type and in the body.
void name_boundary(std::string& type, std::string& body) {
  const std::string prefix = "multipart/byteranges; boundary=";
  if (type.rfind(prefix, 0) != 0) return;
  const std::string b = type.substr(prefix.size());
  type = prefix + "B";
  if (b.empty()) return;
  std::string out;
  for (std::size_t at = 0;;) {
    const std::size_t next = body.find(b, at);
    out += body.substr(at, next - at);
    if (next == std::string::npos) break;
    out += "B";
    at = next + b.size();
  }
  body = out;
}

void add_reply(Digest& d, int i, const RawReply& reply) {
  RawReply r = reply;
  if (auto ct = r.headers.find("content-type"); ct != r.headers.end()) {
    name_boundary(ct->second, r.body);
  }
  const std::string p = std::to_string(i) + " ";
  d[p + "status"] = r.status;
  if (r.interim_continue) d[p + "100-continue"] = "yes";
  const bool content = r.status[0] == '2' || r.status == "304" || r.status == "raw";
  for (const char* name :
       {"content-type", "content-range", "location", "allow", "transfer-encoding", "connection",
        "etag", "last-modified", "accept-ranges", "keep-alive"}) {
    if (r.headers.count(name) != 0) d[p + name] = r.header(name);
  }
  if (r.headers.count("content-length") != 0) {
    d[p + "content-length"] = content ? r.header("content-length") : "present";
  }
  if (content) {
    d[p + "body"] = describe_body(r.body);
  } else if (!r.body.empty()) {
    d[p + "body"] = r.body.find(r.status) != std::string::npos ? "a page naming the status"
                                                               : "a page not naming the status";
  }
}

// Sends the case on a fresh connection to `port` and digests what comes back.
Digest exchange(int port, const Case& c) {
  Digest d;
  RawClient cl(port);
  if (!cl.ok()) return {{"error", "cannot connect"}};
  cl.send(c.request);
  bool then_sent = c.then.empty();
  for (int i = 0; i < c.replies; ++i) {
    const bool is_head = i < static_cast<int>(c.heads.size())
                             ? c.heads[static_cast<std::size_t>(i)] == 'H'
                             : i == 0 && c.request.starts_with("HEAD ");
    RawReply r;
    if (!then_sent) {
      // Expect: 100-continue: the rest goes after the 100 (or a second
      // without one, for a server that does not send it).
      r = cl.read(is_head, 1000, [&] {
        if (!then_sent) cl.send(c.then);
        then_sent = true;
      });
      if (r.status == "timeout" && !then_sent) {
        cl.send(c.then);
        then_sent = true;
        r = cl.read(is_head, kReplyTimeoutMs);
      }
    } else {
      r = cl.read(is_head, kReplyTimeoutMs);
    }
    if (!then_sent) {
      // A final answer without a 100: the client sends the content anyway
      // (the server reads or discards it, RFC 9110 §10.1.1).
      cl.send(c.then);
      then_sent = true;
    }
    add_reply(d, i + 1, r);
    if (r.status == "timeout") {
      d["after"] = "stuck";
      return d;
    }
    if (!std::isdigit(static_cast<unsigned char>(r.status[0])) || r.status.size() != 3) break;
  }
  d["after"] = cl.probe(kReplyTimeoutMs);
  return d;
}

std::string format(const Digest& d) {
  std::string out;
  for (const auto& [k, v] : d) out += k + ": " + v + "\n";
  return out;
}

// ---- the fixture ----------------------------------------------------------

constexpr char kTypes[] =
    "types { text/html html; text/plain txt; application/octet-stream bin; }\n"
    "default_type application/octet-stream;\n";

class NginxDiff : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(write_docroot());
    ASSERT_TRUE(vigil_.start(std::string("access_log off;\nabsolute_redirect off;\n"
                                         "client_max_body_size 100;\n") +
                             kTypes +
                             "server {\n listen 127.0.0.1:0;\n server_name localhost;\n"
                             " root html;\n}\n"))
        << vigil_.output();
    vigil_port_ = vigil_.port();
    ASSERT_GT(vigil_port_, 0) << vigil_.output();
    // absolute_redirect off on both: the ports differ.
    ASSERT_TRUE(nginx_.start(
        std::string("access_log off;\nabsolute_redirect off;\nclient_max_body_size 100;\n") +
        kTypes +
        "server {\n listen 127.0.0.1:PORT;\n server_name localhost;\n"
        " root " +
        vigil_.path("html") + ";\n}\n"))
        << nginx_.error();
  }
  void TearDown() override {
    nginx_.stop();
    vigil_.stop();
  }

  void write_docroot() {
    std::string big(kBigSize, '\0');
    std::uint32_t x = 12345;
    for (char& ch : big) {
      x = x * 1103515245u + 12345u;
      ch = static_cast<char>(x >> 24);
    }
    const std::pair<const char*, std::string> files[] = {
        {"a.txt", kA},
        {"index.html", "<html><body>index</body></html>\n"},
        {"probe.txt", "probe\n"},
        {"dir/index.html", "dir index\n"},
        {"dir/b.txt", "b\n"},
        {"noindex/c.txt", "c\n"},  // a directory without an index
        {"a file%.txt", "spaces and percent\n"},
        {"caf\xc3\xa9.txt", "utf-8 name\n"},
        {"empty.txt", ""},
        {"x.weird", "no type\n"},
        {"UPPER.TXT", "upper\n"},
        {"big.bin", big},
    };
    for (const auto& [name, content] : files) {
      const std::string rel = std::string("html/") + name;
      vigil_.write(rel, content);
      const timespec times[2] = {{kMtime, 0}, {kMtime, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, vigil_.path(rel).c_str(), times, 0), 0) << name;
    }
  }

  void run(const std::vector<Case>& cases) {
    ASSERT_GE(cases.size(), 1u);
    for (const Case& c : cases) {
      SCOPED_TRACE("case \"" + c.name + "\"");
      Digest n = exchange(nginx_.port(), c);
      Digest v = exchange(vigil_port_, c);
      if (std::getenv("NGINX_DIFF_VERBOSE") != nullptr) {
        std::printf("== %s\n-- nginx\n%s-- vigil\n%s", c.name.c_str(), format(n).c_str(),
                    format(v).c_str());
      }
      EXPECT_EQ(n["1 status"], c.status == kRaw ? "raw" : std::to_string(c.status))
          << "nginx (" << NginxServer::version() << ") no longer answers as the table says:\n"
          << format(n);
      for (const Kept& k : c.kept) {
        auto matches = [](const Digest& d, const Kept& kd, const std::string& want) {
          auto it = d.find(kd.key);
          if (want.empty()) return it == d.end();
          return it != d.end() && (want == "*" || it->second == want);
        };
        EXPECT_TRUE(matches(n, k, k.nginx))
            << "kept difference changed on nginx's side: " << k.key << " should be \"" << k.nginx
            << "\" (" << c.why << ")\nnginx:\n"
            << format(n);
        EXPECT_TRUE(matches(v, k, k.vigil))
            << "kept difference changed on Vigil's side: " << k.key << " should be \"" << k.vigil
            << "\" (" << c.why << ")\nvigil:\n"
            << format(v);
        n.erase(k.key);
        v.erase(k.key);
        // Another status: the rest of that response describes something
        // else; only the listed lines are compared.
        if (k.key.ends_with(" status")) {
          const std::string prefix = k.key.substr(0, k.key.size() - 6);
          std::erase_if(n, [&](const auto& kv) { return kv.first.starts_with(prefix); });
          std::erase_if(v, [&](const auto& kv) { return kv.first.starts_with(prefix); });
        }
      }
      EXPECT_EQ(format(n), format(v)) << "nginx, then vigil; request:\n" << c.request;
    }
  }

  VigilServer vigil_;
  NginxServer nginx_;
  int vigil_port_ = 0;
};

// ---- why each kept difference is kept --------------------------------------
// (docs/directives.md, "Where Vigil and nginx differ", says the same for users)

const char* const kWhyAllow =
    "RFC 9110 §15.5.6: a 405 MUST carry Allow; nginx's static 405 has none";
const char* const kWhyPostMissing =
    "Vigil refuses every method but GET and HEAD before looking at the file; nginx's static "
    "module lets POST through to the file lookup (both are allowed, 405 is simpler)";
const char* const kWhyAsterisk =
    "RFC 9112 §3.2.4: the asterisk-form is valid for OPTIONS; nginx cannot parse it";
const char* const kWhyConnect =
    "RFC 9112 §3.2.3: CONNECT takes the authority-form, which nginx cannot parse; Vigil parses "
    "it and refuses the method";
const char* const kWhyUnknownMethod =
    "RFC 9110 §9.1/§15.6.2: an unrecognized method SHOULD be 501; nginx answers 405";
const char* const kWhyLowerMethod =
    "RFC 9110 §9.1: methods are case-sensitive tokens, \"get\" is an unknown method (501); "
    "nginx finds it malformed (400)";
const char* const kWhyHttp09Version =
    "RFC 9110 §15.6.6: a well-formed version with another major number is 505";
const char* const kWhyVersionDigits =
    "RFC 9112 §2.3: HTTP-version is one digit each side of the dot; nginx takes up to 3";
const char* const kWhyHostPort =
    "RFC 9112 §3.2: a Host with an invalid value (port = *DIGIT) MUST be 400";
const char* const kWhy412 =
    "nginx closes the connection after a 412 although it said keep-alive; Vigil keeps it";
const char* const kWhyHeadRange =
    "RFC 9110 §14.2: Range is defined for GET only and MUST be ignored for other methods";
const char* const kWhyEmptyRange =
    "RFC 9110 §14.1.2: no range of an empty file is satisfiable (416); nginx ignores it";
const char* const kWhyChunkedLast =
    "RFC 9112 §6.3: Transfer-Encoding without chunked last MUST be 400 (nginx: 501)";
const char* const kWhyChunkedTwice =
    "RFC 9112 §6.1: chunked MUST NOT be applied twice: a malformed request (nginx: 501)";
const char* const kWhyContinueBeforeError =
    "Vigil reads (and discards) the content before answering, so it asks for it; nginx answers "
    "first and discards it after (both allowed by RFC 9110 §10.1.1)";
const char* const kWhyInvalidField =
    "RFC 9112 §5: a field line is a token, a colon and a value; nginx skips invalid ones "
    "(ignore_invalid_headers), Vigil refuses the request";
const char* const kWhyControlInValue =
    "RFC 9110 §5.5: control characters are not field-vchar; nginx accepts them";
const char* const kWhyTargetChars =
    "RFC 9112 §3.2 / RFC 3986: raw octets >= 0x80 and '#' are not in a request-target";
const char* const kWhyWhitespace =
    "RFC 9112 §3: request-line parts are separated by one SP; the leniency is a MAY";
const char* const kWhy431 =
    "RFC 6585 §5: 431 for too large header fields; nginx answers 400 (its internal 494)";

// ---- the corpus -------------------------------------------------------------

TEST_F(NginxDiff, Files) {
  run({
      {.name = "GET file", .request = get("/a.txt"), .status = 200},
      {.name = "HEAD file", .request = head("/a.txt"), .status = 200},
      {.name = "GET /", .request = get("/"), .status = 200},
      {.name = "HEAD /", .request = head("/"), .status = 200},
      {.name = "GET index by name", .request = get("/index.html"), .status = 200},
      {.name = "GET missing", .request = get("/missing.txt"), .status = 404},
      {.name = "HEAD missing", .request = head("/missing.txt"), .status = 404},
      {.name = "directory without slash", .request = get("/dir"), .status = 301},
      {.name = "HEAD directory without slash", .request = head("/dir"), .status = 301},
      {.name = "directory without slash, query kept", .request = get("/dir?x=1&y"), .status = 301},
      {.name = "directory index", .request = get("/dir/"), .status = 200},
      {.name = "file in directory", .request = get("/dir/b.txt"), .status = 200},
      {.name = "directory without index (autoindex off)",
       .request = get("/noindex/"),
       .status = 403},
      {.name = "directory without index, no slash", .request = get("/noindex"), .status = 301},
      {.name = "file with a slash after it", .request = get("/a.txt/"), .status = 404},
      {.name = "binary file", .request = get("/big.bin"), .status = 200},
      {.name = "HEAD binary file", .request = head("/big.bin"), .status = 200},
      {.name = "empty file", .request = get("/empty.txt"), .status = 200},
      {.name = "unknown extension: default_type", .request = get("/x.weird"), .status = 200},
      {.name = "extension case", .request = get("/UPPER.TXT"), .status = 200},
      {.name = "missing in a missing directory", .request = get("/nodir/x.txt"), .status = 404},
  });
}

TEST_F(NginxDiff, Paths) {
  run({
      {.name = "encoded dot", .request = get("/a%2etxt"), .status = 200},
      {.name = "encoded letter", .request = get("/%61.txt"), .status = 200},
      {.name = "encoded space and percent", .request = get("/a%20file%25.txt"), .status = 200},
      {.name = "encoded UTF-8", .request = get("/caf%C3%A9.txt"), .status = 200},
      {.name = "lower-case escapes", .request = get("/caf%c3%a9.txt"), .status = 200},
      {.name = "encoded slash", .request = get("/dir%2Fb.txt"), .status = 200},
      {.name = "dot segment", .request = get("/./a.txt"), .status = 200},
      {.name = "dot-dot inside", .request = get("/dir/../a.txt"), .status = 200},
      {.name = "dot in the middle", .request = get("/dir/./b.txt"), .status = 200},
      {.name = "trailing dot-dot", .request = get("/dir/.."), .status = 200},
      {.name = "trailing dot", .request = get("/dir/."), .status = 200},
      {.name = "encoded dot-dot inside", .request = get("/dir/%2e%2e/a.txt"), .status = 200},
      {.name = "dot-dot above the root", .request = get("/../a.txt"), .status = 400},
      {.name = "dot-dot above the root, deeper", .request = get("/dir/../../a.txt"), .status = 400},
      {.name = "upper-case encoded dot-dot inside",
       .request = get("/dir/%2E%2E/a.txt"),
       .status = 200},
      {.name = "dot-dot after a file name", .request = get("/index.html/.."), .status = 200},
      {.name = "query on the index", .request = get("/?x=1"), .status = 200},
      {.name = "absolute-form https", .request = get("https://localhost/a.txt"), .status = 200},
      {.name = "absolute-form upper-case scheme and host",
       .request = get("HTTP://LOCALHOST/a.txt"),
       .status = 200},
      {.name = "encoded dot-dot above the root", .request = get("/%2e%2e/a.txt"), .status = 400},
      {.name = "double slash", .request = get("//a.txt"), .status = 200},
      {.name = "double slash inside", .request = get("/dir//b.txt"), .status = 200},
      {.name = "query", .request = get("/a.txt?x=1&y=2"), .status = 200},
      {.name = "empty query", .request = get("/a.txt?"), .status = 200},
      {.name = "query with a bad escape", .request = get("/a.txt?%zz"), .status = 200},
      {.name = "query with a slash and dots", .request = get("/a.txt?/../x"), .status = 200},
      {.name = "path with a bad escape", .request = get("/a%zz.txt"), .status = 400},
      {.name = "encoded NUL", .request = get("/a.txt%00"), .status = 400},
      {.name = "semicolon is part of the name", .request = get("/a.txt;p=1"), .status = 404},
      {.name = "absolute-form", .request = get("http://localhost/a.txt"), .status = 200},
      {.name = "absolute-form, other host than Host",
       .request = get("http://other.example/a.txt"),
       .status = 200},
      {.name = "absolute-form without a path", .request = get("http://localhost"), .status = 200},
      {.name = "absolute-form with a port",
       .request = get("http://localhost:1234/a.txt"),
       .status = 200},
      {.name = "absolute-form with a query only",
       .request = get("http://localhost?x"),
       .status = 200},
      {.name = "target without a leading slash", .request = get("a.txt"), .status = 400},
      {.name = "raw space in the path", .request = get("/a file%.txt"), .status = 400},
  });
}

TEST_F(NginxDiff, Methods) {
  run({
      {.name = "POST to a file",
       .request = get("/a.txt").replace(0, 3, "POST"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "POST with a body",
       .request = req("POST /a.txt HTTP/1.1", "Content-Length: 5\r\n") + "hello",
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "POST to a missing file",
       .request = req("POST /missing.txt HTTP/1.1"),
       .status = 404,
       .kept = {{"1 status", "404", "405"}},
       .why = kWhyPostMissing},
      {.name = "PUT with a body",
       .request = req("PUT /a.txt HTTP/1.1", "Content-Length: 3\r\n") + "abc",
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "PUT without a length",
       .request = req("PUT /a.txt HTTP/1.1"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "DELETE",
       .request = req("DELETE /a.txt HTTP/1.1"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "OPTIONS on a file",
       .request = req("OPTIONS /a.txt HTTP/1.1"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "OPTIONS *",
       .request = req("OPTIONS * HTTP/1.1"),
       .status = 400,
       .kept = {{"1 status", "400", "405"}, {"after", "closed", "open"}},
       .why = kWhyAsterisk},
      {.name = "TRACE",
       .request = req("TRACE / HTTP/1.1"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "PATCH",
       .request = req("PATCH /a.txt HTTP/1.1", "Content-Length: 0\r\n"),
       .status = 405,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "CONNECT",
       .request = req("CONNECT localhost:80 HTTP/1.1"),
       .status = 400,
       .kept = {{"1 status", "400", "405"}, {"after", "closed", "open"}},
       .why = kWhyConnect},
      {.name = "unknown method",
       .request = req("FOO /a.txt HTTP/1.1"),
       .status = 405,
       .kept = {{"1 status", "405", "501"}, {"after", "open", "closed"}},
       .why = kWhyUnknownMethod},
      {.name = "WebDAV method",
       .request = req("MKCOL /dir/ HTTP/1.1"),
       .status = 405,
       .kept = {{"1 status", "405", "501"}, {"after", "open", "closed"}},
       .why = kWhyUnknownMethod},
      {.name = "lower-case method",
       .request = req("get /a.txt HTTP/1.1"),
       .status = 400,
       .kept = {{"1 status", "400", "501"}},
       .why = kWhyLowerMethod},
      {.name = "method with a non-token byte",
       .request = req("G@T /a.txt HTTP/1.1"),
       .status = 400},
  });
}

TEST_F(NginxDiff, Versions) {
  run({
      {.name = "HTTP/1.0", .request = "GET /a.txt HTTP/1.0\r\n\r\n", .status = 200},
      {.name = "HTTP/1.0 keep-alive",
       .request = "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
       .status = 200},
      {.name = "HTTP/1.0 with Host", .request = req("GET /a.txt HTTP/1.0"), .status = 200},
      {.name = "HTTP/1.0 Connection: Keep-Alive (case)",
       .request = "GET /a.txt HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
       .status = 200},
      {.name = "HTTP/1.0 keep-alive and close",
       .request = "GET /a.txt HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
       .status = 200},
      {.name = "HTTP/1.1 Connection: close",
       .request = get("/a.txt", "Connection: close\r\n"),
       .status = 200},
      {.name = "HTTP/1.1 close among other options",
       .request = get("/a.txt", "Connection: keep-alive, close\r\n"),
       .status = 200},
      {.name = "HTTP/1.1 Connection: CLOSE",
       .request = get("/a.txt", "Connection: CLOSE\r\n"),
       .status = 200},
      {.name = "HTTP/1.2", .request = req("GET /a.txt HTTP/1.2"), .status = 200},
      {.name = "HTTP/1.9", .request = req("GET /a.txt HTTP/1.9"), .status = 200},
      {.name = "HTTP/2.0", .request = req("GET /a.txt HTTP/2.0"), .status = 505},
      {.name = "HTTP/3.0", .request = req("GET /a.txt HTTP/3.0"), .status = 505},
      {.name = "HTTP/0.9 spelled out",
       .request = req("GET /a.txt HTTP/0.9"),
       .status = 400,
       .kept = {{"1 status", "400", "505"}},
       .why = kWhyHttp09Version},
      {.name = "HTTP/1.10",
       .request = req("GET /a.txt HTTP/1.10"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyVersionDigits},
      {.name = "HTTP/01.1", .request = req("GET /a.txt HTTP/01.1"), .status = 400},
      {.name = "HTTP/1", .request = req("GET /a.txt HTTP/1"), .status = 400},
      {.name = "lower-case HTTP", .request = req("GET /a.txt http/1.1"), .status = 400},
      {.name = "HTTP/0.9 request", .request = "GET /a.txt\r\n", .status = kRaw},
      {.name = "HTTP/0.9 request with a query and spaces",
       .request = "GET /a.txt?x=1  \n",
       .status = kRaw},
      {.name = "HTTP/0.9 absolute-form request",
       .request = "GET http://localhost/a.txt\r\n",
       .status = kRaw},
      {.name = "HTTP/0.9 request, more bytes after it",
       .request = "GET /a.txt\r\nGET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n",
       .status = kRaw},
      {.name = "no Host in HTTP/1.1", .request = "GET /a.txt HTTP/1.1\r\n\r\n", .status = 400},
      {.name = "empty Host",
       .request = "GET /a.txt HTTP/1.1\r\nHost:\r\n\r\n",
       .status = 400},
      {.name = "duplicate Host",
       .request = "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nHost: other\r\n\r\n",
       .status = 400},
      {.name = "Host with a port",
       .request = "GET /a.txt HTTP/1.1\r\nHost: localhost:99\r\n\r\n",
       .status = 200},
      {.name = "Host with a slash",
       .request = "GET /a.txt HTTP/1.1\r\nHost: a/b\r\n\r\n",
       .status = 400},
      {.name = "Host IPv6 literal",
       .request = "GET /a.txt HTTP/1.1\r\nHost: [::1]\r\n\r\n",
       .status = 200},
      {.name = "Host with a trailing dot",
       .request = "GET /a.txt HTTP/1.1\r\nHost: localhost.\r\n\r\n",
       .status = 200},
      {.name = "Host with a bad port",
       .request = "GET /a.txt HTTP/1.1\r\nHost: localhost:x\r\n\r\n",
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyHostPort},
  });
}

TEST_F(NginxDiff, Conditionals) {
  const std::string e = kETagA;
  run({
      {.name = "If-Modified-Since exact",
       .request = get("/a.txt", std::string("If-Modified-Since: ") + kDate + "\r\n"),
       .status = 304},
      {.name = "HEAD If-Modified-Since exact",
       .request = head("/a.txt", std::string("If-Modified-Since: ") + kDate + "\r\n"),
       .status = 304},
      {.name = "If-Modified-Since earlier",
       .request = get("/a.txt", std::string("If-Modified-Since: ") + kEarlier + "\r\n"),
       .status = 200},
      {.name = "If-Modified-Since later (exact mode)",
       .request = get("/a.txt", std::string("If-Modified-Since: ") + kLater + "\r\n"),
       .status = 200},
      {.name = "If-Modified-Since in RFC 850 form",
       .request = get("/a.txt", "If-Modified-Since: Tuesday, 02-Jan-24 03:04:05 GMT\r\n"),
       .status = 304},
      {.name = "If-Modified-Since in asctime form",
       .request = get("/a.txt", "If-Modified-Since: Tue Jan  2 03:04:05 2024\r\n"),
       .status = 304},
      {.name = "If-Modified-Since garbage",
       .request = get("/a.txt", "If-Modified-Since: x\r\n"),
       .status = 200},
      {.name = "If-None-Match",
       .request = get("/a.txt", "If-None-Match: " + e + "\r\n"),
       .status = 304},
      {.name = "If-None-Match weak",
       .request = get("/a.txt", "If-None-Match: W/" + e + "\r\n"),
       .status = 304},
      {.name = "If-None-Match *", .request = get("/a.txt", "If-None-Match: *\r\n"), .status = 304},
      {.name = "If-None-Match other",
       .request = get("/a.txt", "If-None-Match: \"x\"\r\n"),
       .status = 200},
      {.name = "If-None-Match list",
       .request = get("/a.txt", "If-None-Match: \"x\", " + e + "\r\n"),
       .status = 304},
      {.name = "If-None-Match other wins over If-Modified-Since",
       .request = get("/a.txt",
                      std::string("If-None-Match: \"x\"\r\nIf-Modified-Since: ") + kDate + "\r\n"),
       .status = 200},
      {.name = "If-Match", .request = get("/a.txt", "If-Match: " + e + "\r\n"), .status = 200},
      {.name = "If-Match other",
       .request = get("/a.txt", "If-Match: \"x\"\r\n"),
       .status = 412,
       .kept = {{"after", "closed", "open"}},
       .why = kWhy412},
      {.name = "If-Match *", .request = get("/a.txt", "If-Match: *\r\n"), .status = 200},
      {.name = "If-Match weak never matches",
       .request = get("/a.txt", "If-Match: W/" + e + "\r\n"),
       .status = 412,
       .kept = {{"after", "closed", "open"}},
       .why = kWhy412},
      {.name = "If-Unmodified-Since later",
       .request = get("/a.txt", std::string("If-Unmodified-Since: ") + kLater + "\r\n"),
       .status = 200},
      {.name = "If-Unmodified-Since earlier",
       .request = get("/a.txt", std::string("If-Unmodified-Since: ") + kEarlier + "\r\n"),
       .status = 412,
       .kept = {{"after", "closed", "open"}},
       .why = kWhy412},
      {.name = "If-Unmodified-Since exact",
       .request = get("/a.txt", std::string("If-Unmodified-Since: ") + kDate + "\r\n"),
       .status = 200},
      {.name = "If-None-Match on a missing file",
       .request = get("/missing.txt", "If-None-Match: *\r\n"),
       .status = 404},
  });
}

TEST_F(NginxDiff, Ranges) {
  const std::string e = kETagA;
  run({
      {.name = "first bytes", .request = get("/a.txt", "Range: bytes=0-4\r\n"), .status = 206},
      {.name = "open-ended", .request = get("/a.txt", "Range: bytes=5-\r\n"), .status = 206},
      {.name = "suffix", .request = get("/a.txt", "Range: bytes=-5\r\n"), .status = 206},
      {.name = "suffix longer than the file",
       .request = get("/a.txt", "Range: bytes=-100\r\n"),
       .status = 206},
      {.name = "one byte", .request = get("/a.txt", "Range: bytes=0-0\r\n"), .status = 206},
      {.name = "last beyond the end",
       .request = get("/a.txt", "Range: bytes=3-1000\r\n"),
       .status = 206},
      {.name = "start at the end", .request = get("/a.txt", "Range: bytes=13-\r\n"), .status = 416},
      {.name = "start beyond the end",
       .request = get("/a.txt", "Range: bytes=100-200\r\n"),
       .status = 416},
      {.name = "zero-length suffix",
       .request = get("/a.txt", "Range: bytes=-0\r\n"),
       .status = 416},
      {.name = "last before first",
       .request = get("/a.txt", "Range: bytes=5-2\r\n"),
       .status = 416},
      {.name = "several ranges",
       .request = get("/a.txt", "Range: bytes=0-1,3-4\r\n"),
       .status = 206},
      {.name = "several ranges, out of order and overlapping",
       .request = get("/a.txt", "Range: bytes=-3, 0-4, 2-3\r\n"),
       .status = 206},
      {.name = "overlapping ranges over the size",
       .request = get("/a.txt", "Range: bytes=0-, 0-1\r\n"),
       .status = 200},
      {.name = "not a number",
       .request = get("/a.txt", "Range: bytes=abc\r\n"),
       .status = 416},
      {.name = "other unit", .request = get("/a.txt", "Range: items=0-4\r\n"), .status = 200},
      {.name = "upper-case unit", .request = get("/a.txt", "Range: BYTES=0-4\r\n"), .status = 206},
      {.name = "If-Range with the etag",
       .request = get("/a.txt", "Range: bytes=0-4\r\nIf-Range: " + e + "\r\n"),
       .status = 206},
      {.name = "If-Range with another etag",
       .request = get("/a.txt", "Range: bytes=0-4\r\nIf-Range: \"x\"\r\n"),
       .status = 200},
      {.name = "If-Range with the date",
       .request = get("/a.txt", std::string("Range: bytes=0-4\r\nIf-Range: ") + kDate + "\r\n"),
       .status = 206},
      {.name = "If-Range with another date",
       .request = get("/a.txt", std::string("Range: bytes=0-4\r\nIf-Range: ") + kEarlier + "\r\n"),
       .status = 200},
      {.name = "HEAD with a range",
       .request = head("/a.txt", "Range: bytes=0-4\r\n"),
       .status = 206,
       .kept = {{"1 status", "206", "200"}},
       .why = kWhyHeadRange},
      {.name = "HTTP/1.0 range",
       .request = "GET /a.txt HTTP/1.0\r\nRange: bytes=0-4\r\n\r\n",
       .status = 206},
      {.name = "range of a binary file",
       .request = get("/big.bin", "Range: bytes=1000-60999\r\n"),
       .status = 206},
      {.name = "range of an empty file",
       .request = get("/empty.txt", "Range: bytes=0-0\r\n"),
       .status = 200,
       .kept = {{"1 status", "200", "416"}},
       .why = kWhyEmptyRange},
      {.name = "range and a matching If-None-Match",
       .request = get("/a.txt", "Range: bytes=0-4\r\nIf-None-Match: " + e + "\r\n"),
       .status = 304},
      {.name = "range of a missing file",
       .request = get("/missing.txt", "Range: bytes=0-4\r\n"),
       .status = 404},
  });
}

TEST_F(NginxDiff, Bodies) {
  run({
      {.name = "GET with a body",
       .request = get("/a.txt", "Content-Length: 5\r\n") + "hello",
       .status = 200},
      {.name = "GET with Content-Length: 0",
       .request = get("/a.txt", "Content-Length: 0\r\n"),
       .status = 200},
      {.name = "HEAD with a body",
       .request = head("/a.txt", "Content-Length: 5\r\n") + "hello",
       .status = 200},
      {.name = "GET with a chunked body",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n",
       .status = 200},
      {.name = "chunked, no data",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n",
       .status = 200},
      {.name = "chunk extension",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "5;x=1\r\nhello\r\n0\r\n\r\n",
       .status = 200},
      {.name = "chunked trailer",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "0\r\nX-T: 1\r\n\r\n",
       .status = 200},
      {.name = "upper-case chunked",
       .request = get("/a.txt", "Transfer-Encoding: Chunked\r\n") + "0\r\n\r\n",
       .status = 200},
      {.name = "bad chunk size",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "zz\r\nhello\r\n0\r\n\r\n",
       .status = 400},
      {.name = "Transfer-Encoding and Content-Length",
       .request =
           get("/a.txt", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n") + "0\r\n\r\n",
       .status = 400},
      {.name = "Content-Length not a number",
       .request = get("/a.txt", "Content-Length: abc\r\n"),
       .status = 400},
      {.name = "negative Content-Length",
       .request = get("/a.txt", "Content-Length: -1\r\n"),
       .status = 400},
      {.name = "Content-Length with a sign",
       .request = get("/a.txt", "Content-Length: +5\r\n"),
       .status = 400},
      {.name = "Content-Length overflowing",
       .request = get("/a.txt", "Content-Length: 99999999999999999999\r\n"),
       .status = 400},
      {.name = "two Content-Lengths",
       .request = get("/a.txt", "Content-Length: 5\r\nContent-Length: 5\r\n") + "hello",
       .status = 400},
      {.name = "Content-Length list",
       .request = get("/a.txt", "Content-Length: 5, 5\r\n") + "hello",
       .status = 400},
      {.name = "Content-Length with spaces",
       .request = get("/a.txt", "Content-Length:  5  \r\n") + "hello",
       .status = 200},
      {.name = "body over client_max_body_size",
       .request = get("/a.txt", "Content-Length: 200\r\n") + std::string(200, 'b'),
       .status = 413},
      {.name = "unknown transfer coding",
       .request = get("/a.txt", "Transfer-Encoding: gzip\r\n"),
       .status = 501,
       .kept = {{"1 status", "501", "400"}},
       .why = kWhyChunkedLast},
      {.name = "gzip then chunked",
       .request = get("/a.txt", "Transfer-Encoding: gzip, chunked\r\n") + "0\r\n\r\n",
       .status = 501},
      {.name = "chunked then gzip",
       .request = get("/a.txt", "Transfer-Encoding: chunked, gzip\r\n") + "0\r\n\r\n",
       .status = 501,
       .kept = {{"1 status", "501", "400"}},
       .why = kWhyChunkedLast},
      {.name = "chunked twice",
       .request = get("/a.txt", "Transfer-Encoding: chunked, chunked\r\n") + "0\r\n\r\n",
       .status = 501,
       .kept = {{"1 status", "501", "400"}},
       .why = kWhyChunkedTwice},
      {.name = "Transfer-Encoding in HTTP/1.0",
       .request = "GET /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       .status = 400},
      {.name = "Expect: 100-continue",
       .request = get("/a.txt", "Expect: 100-continue\r\nContent-Length: 5\r\n"),
       .status = 200,
       .then = "hello"},
      {.name = "Expect: 100-continue, body already sent",
       .request = get("/a.txt", "Expect: 100-continue\r\nContent-Length: 5\r\n") + "hello",
       .status = 200},
      {.name = "Expect: 100-continue in HTTP/1.0",
       .request = "GET /a.txt HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
       .status = 200},
      {.name = "Expect: 100-continue without a body",
       .request = get("/a.txt", "Expect: 100-continue\r\n"),
       .status = 200},
      {.name = "unknown expectation", .request = get("/a.txt", "Expect: foo\r\n"), .status = 200},
      {.name = "Expect: 100-continue on a missing file",
       .request = get("/missing.txt", "Expect: 100-continue\r\nContent-Length: 5\r\n"),
       .status = 404,
       .then = "hello",
       .kept = {{"1 100-continue", "", "yes"}},
       .why = kWhyContinueBeforeError},
  });
}

TEST_F(NginxDiff, MalformedHeaders) {
  run({
      {.name = "field without a colon",
       .request = get("/a.txt", "X-Foo\r\n"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyInvalidField},
      {.name = "space before the colon", .request = get("/a.txt", "X-Foo : 1\r\n"), .status = 400},
      {.name = "obs-fold", .request = get("/a.txt", "X-Foo: 1\r\n 2\r\n"), .status = 400},
      {.name = "whitespace before the first field",
       .request = "GET /a.txt HTTP/1.1\r\n Host: localhost\r\n\r\n",
       .status = 400},
      {.name = "non-token byte in a name",
       .request = get("/a.txt", "X@Foo: 1\r\n"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyInvalidField},
      {.name = "underscore in a name", .request = get("/a.txt", "X_Foo: 1\r\n"), .status = 200},
      {.name = "empty name", .request = get("/a.txt", ": 1\r\n"), .status = 400},
      {.name = "NUL in a value",
       .request = get("/a.txt", std::string("X-Foo: a\0b\r\n", 12)),
       .status = 400},
      {.name = "control byte in a value",
       .request = get("/a.txt",
                      "X-Foo: a\x01"
                      "b\r\n"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyControlInValue},
      {.name = "DEL in a value",
       .request = get("/a.txt",
                      "X-Foo: a\x7f"
                      "b\r\n"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyControlInValue},
      {.name = "obs-text in a value",
       .request = get("/a.txt", "X-Foo: caf\xc3\xa9\r\n"),
       .status = 200},
      {.name = "bare CR in a value", .request = get("/a.txt", "X-Foo: a\rb\r\n"), .status = 400},
      {.name = "bare LF line ends",
       .request = "GET /a.txt HTTP/1.1\nHost: localhost\nX-Foo: 1\n\n",
       .status = 200},
      {.name = "tab around a value", .request = get("/a.txt", "X-Foo:\t1\t\r\n"), .status = 200},
      {.name = "many fields",
       .request =
           [] {
             std::string f;
             for (int i = 0; i < 60; ++i) f += "X-F" + std::to_string(i) + ": v\r\n";
             return get("/a.txt", f);
           }(),
       .status = 200},
      {.name = "NUL in the request line",
       .request = std::string("GET /a\0.txt HTTP/1.1\r\nHost: localhost\r\n\r\n", 42),
       .status = 400},
      {.name = "control byte in the target", .request = get("/a\x01.txt"), .status = 400},
      {.name = "DEL in the target", .request = get("/a\x7f.txt"), .status = 400},
      {.name = "raw UTF-8 in the target",
       .request = get("/caf\xc3\xa9.txt"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyTargetChars},
      {.name = "fragment in the target",
       .request = get("/a.txt#frag"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyTargetChars},
      {.name = "tabs in the request line",
       .request = "GET\t/a.txt\tHTTP/1.1\r\nHost: localhost\r\n\r\n",
       .status = 400},
      {.name = "two spaces before the target",
       .request = req("GET  /a.txt HTTP/1.1"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyWhitespace},
      {.name = "two spaces before the version",
       .request = req("GET /a.txt  HTTP/1.1"),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyWhitespace},
      {.name = "space after the version",
       .request = req("GET /a.txt HTTP/1.1 "),
       .status = 200,
       .kept = {{"1 status", "200", "400"}, {"after", "open", "closed"}},
       .why = kWhyWhitespace},
      {.name = "empty lines before the request line",
       .request = "\r\n\r\n" + get("/a.txt"),
       .status = 200},
      {.name = "NUL before the request line",
       .request = std::string("\0", 1) + get("/a.txt"),
       .status = 400},
      {.name = "bare CR ending the request line",
       .request = "GET /a.txt HTTP/1.1\rHost: localhost\r\n\r\n",
       .status = 400},
  });
}

TEST_F(NginxDiff, Limits) {
  run({
      {.name = "request line over client_header_buffer_size",
       .request = get("/a.txt?" + std::string(3000, 'q')),
       .status = 200},
      {.name = "request line just under a large buffer",
       .request = get("/a.txt?" + std::string(8000, 'q')),
       .status = 200},
      {.name = "request line over a large buffer",
       .request = get("/a.txt?" + std::string(9000, 'q')),
       .status = 414},
      {.name = "field over client_header_buffer_size",
       .request = get("/a.txt", "X-Long: " + std::string(3000, 'h') + "\r\n"),
       .status = 200},
      {.name = "field over a large buffer",
       .request = get("/a.txt", "X-Long: " + std::string(9000, 'h') + "\r\n"),
       .status = 400,
       .kept = {{"1 status", "400", "431"}},
       .why = kWhy431},
      {.name = "header over all large buffers",
       .request =
           [] {
             std::string f;
             for (int i = 0; i < 6; ++i)
               f += "X-L" + std::to_string(i) + ": " + std::string(7000, 'h') + "\r\n";
             return get("/a.txt", f);
           }(),
       .status = 400,
       .kept = {{"1 status", "400", "431"}},
       .why = kWhy431},
  });
}

TEST_F(NginxDiff, Pipelining) {
  run({
      {.name = "two GETs",
       .request = get("/a.txt") + get("/dir/b.txt"),
       .status = 200,
       .replies = 2},
      {.name = "GET, HEAD, GET",
       .request = get("/a.txt") + head("/a.txt") + get("/index.html"),
       .status = 200,
       .replies = 3,
       .heads = "GHG"},
      {.name = "404 then 200",
       .request = get("/missing.txt") + get("/a.txt"),
       .status = 404,
       .replies = 2},
      {.name = "Connection: close first",
       .request = get("/a.txt", "Connection: close\r\n") + get("/a.txt"),
       .status = 200,
       .replies = 2},
      {.name = "body then GET",
       .request = get("/a.txt", "Content-Length: 5\r\n") + "hello" + get("/dir/b.txt"),
       .status = 200,
       .replies = 2},
      {.name = "chunked body then GET",
       .request = get("/a.txt", "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n" +
                  get("/dir/b.txt"),
       .status = 200,
       .replies = 2},
      {.name = "HTTP/1.0 keep-alive then HTTP/1.1",
       .request = "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get("/dir/b.txt"),
       .status = 200,
       .replies = 2},
      {.name = "HTTP/1.0 then more",
       .request = "GET /a.txt HTTP/1.0\r\n\r\n" + get("/dir/b.txt"),
       .status = 200,
       .replies = 2},
      {.name = "bad request then GET",
       .request = get("/a%zz") + get("/a.txt"),
       .status = 400,
       .replies = 2},
      {.name = "405 with a body then GET",
       .request = req("POST /a.txt HTTP/1.1", "Content-Length: 5\r\n") + "hello" + get("/a.txt"),
       .status = 405,
       .replies = 2,
       .kept = {{"1 allow", "", "GET, HEAD"}},
       .why = kWhyAllow},
      {.name = "412 then GET",
       .request = get("/a.txt", "If-Match: \"x\"\r\n") + get("/a.txt"),
       .status = 412,
       .replies = 2,
       .kept = {{"after", "closed", "open"}, {"2 status", "none", "200"}},
       .why = kWhy412},
      {.name = "416 then GET",
       .request = get("/a.txt", "Range: bytes=100-\r\n") + get("/a.txt"),
       .status = 416,
       .replies = 2},
      {.name = "304 then GET",
       .request = get("/a.txt", std::string("If-None-Match: ") + kETagA + "\r\n") + get("/a.txt"),
       .status = 304,
       .replies = 2},
      {.name = "HEAD 404 then GET",
       .request = head("/missing.txt") + get("/a.txt"),
       .status = 404,
       .replies = 2,
       .heads = "HG"},
      {.name = "bare LF requests back to back",
       .request = "GET /a.txt HTTP/1.1\nHost: localhost\n\nGET /dir/b.txt HTTP/1.1\nHost: x\n\n",
       .status = 200,
       .replies = 2},
      {.name = "301 then GET", .request = get("/dir") + get("/a.txt"), .status = 301, .replies = 2},
  });
}

}  // namespace
}  // namespace vigil
