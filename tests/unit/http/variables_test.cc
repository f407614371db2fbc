// Compiled strings with variables: syntax errors, every variable's value,
// escaping, and the "combined" format through a template being byte-identical
// to the fixed access log writer.
#include "http/core/variables.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <memory>
#include <string>

#include "http/log/access_log.h"
#include "http/core/request.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

class Vars : public ::testing::Test {
 protected:
  void SetUp() override {
    clock::time_update_fixed(1795000000, 250, 100000, 0);
    r_ = std::make_unique<Request>();
    Request& r = *r_;
    r.c = &c_;
    r.fields = r.field_inline;
    peer_.sin_family = AF_INET;
    peer_.sin_port = htons(40001);
    ::inet_pton(AF_INET, "10.1.2.3", &peer_.sin_addr);
    local_.sin_family = AF_INET;
    local_.sin_port = htons(8080);
    ::inet_pton(AF_INET, "127.0.0.1", &local_.sin_addr);
    c_.peer_addr = reinterpret_cast<sockaddr*>(&peer_);
    c_.local_addr = reinterpret_cast<sockaddr*>(&local_);
    c_.addr_text = "10.1.2.3";
    c_.number = 17;
    c_.requests = 3;
    line_ = "GET /a/../b?x=1&y=%22 HTTP/1.1";
    r.line.line = line_;
    r.line.method_name = std::string_view(line_).substr(0, 3);
    r.line.method = Method::kGet;
    r.line.target = std::string_view(line_).substr(4, 17);
    r.line.path = std::string_view(line_).substr(4, 7);
    r.line.query = std::string_view(line_).substr(12, 9);
    r.line.has_query = true;
    r.uri = "/b";
    r.check.host = "Example.COM";
    r.start_msec = 100000 - 1234;
  }
  void field(std::string_view name, std::string_view value) {
    r_->fields[r_->nfields++] = HeaderField{name, value, HeaderId::kOther};
  }
  std::string eval(std::string_view text, VarEscape esc = VarEscape::kNone, bool dash = false) {
    auto t = VarTemplate::compile(text);
    EXPECT_TRUE(t) << t.status().message();
    if (!t) return "<error>";
    std::string out(t->length(*r_, esc, dash), '\0');
    char* end = t->write(*r_, out.data(), esc, dash);
    EXPECT_LE(static_cast<std::size_t>(end - out.data()), out.size());
    out.resize(static_cast<std::size_t>(end - out.data()));
    return out;
  }
  std::string error(std::string_view text) {
    auto t = VarTemplate::compile(text);
    return t ? std::string("<ok>") : t.status().message();
  }

  Connection c_;
  sockaddr_in peer_{};
  sockaddr_in local_{};
  std::string line_;
  std::unique_ptr<Request> r_;
};

TEST_F(Vars, LiteralOnly) {
  auto t = VarTemplate::compile("plain text");
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->is_literal());
  EXPECT_EQ(t->literal_text(), "plain text");
  EXPECT_EQ(eval("plain text"), "plain text");
  EXPECT_EQ(eval(""), "");
}

TEST_F(Vars, SyntaxErrors) {
  EXPECT_EQ(error("$nosuch"), "unknown \"nosuch\" variable");
  EXPECT_EQ(error("a $ b"), "invalid variable name in \"a $ b\"");
  EXPECT_EQ(error("${host"), "the closing bracket in \"host\" variable is missing");
  EXPECT_EQ(error("$"), "invalid variable name in \"$\"");
  EXPECT_EQ(error("${}"), "invalid variable name in \"${}\"");
  EXPECT_EQ(error("$http_"), "<ok>");  // a prefix alone names nothing, as nginx's: no value
  EXPECT_EQ(error("$nosuch_"), "unknown \"nosuch_\" variable");
}

TEST_F(Vars, ConnectionAndRequest) {
  EXPECT_EQ(eval("$remote_addr:$remote_port"), "10.1.2.3:40001");
  EXPECT_EQ(eval("$server_addr:$server_port"), "127.0.0.1:8080");
  EXPECT_EQ(eval("$binary_remote_addr"), std::string("\x0a\x01\x02\x03", 4));
  EXPECT_EQ(eval("$host"), "example.com");
  EXPECT_EQ(eval("${scheme}://$host$request_uri"), "http://example.com/a/../b?x=1&y=%22");
  EXPECT_EQ(eval("$uri|$args|$request_method"), "/b|x=1&y=%22|GET");
  EXPECT_EQ(eval("$request"), line_);
  EXPECT_EQ(eval("$connection $connection_requests"), "17 3");
  EXPECT_EQ(eval("$request_time"), "1.234");
  EXPECT_EQ(eval("$time_local"), std::string(clock::common_log_time()));
  EXPECT_EQ(eval("$time_iso8601"), std::string(clock::iso8601()));
  // Names are case-insensitive and may be braced next to name characters.
  EXPECT_EQ(eval("${HOST}x"), "example.comx");
}

TEST_F(Vars, BytesAndStatus) {
  r_->status = 404;
  r_->sent_start = 100;
  c_.sent = 100 + 150 + 20;
  r_->header_size = 150;
  EXPECT_EQ(eval("$status $bytes_sent $body_bytes_sent"), "404 170 20");
}

TEST_F(Vars, HttpHeaders) {
  field("User-Agent", "curl/8");
  field("X-Custom-Thing", "one");
  field("x-custom-thing", "two");
  EXPECT_EQ(eval("$http_user_agent"), "curl/8");
  EXPECT_EQ(eval("$http_x_custom_thing"), "one, two");
  EXPECT_EQ(eval("[$http_missing]"), "[]");
  EXPECT_EQ(eval("[$http_missing]", VarEscape::kDefault, true), "[-]");
}

TEST_F(Vars, QueryArgumentsAndCookies) {
  EXPECT_EQ(eval("[$arg_x][$arg_Y][$is_args]"), "[1][%22][?]");
  EXPECT_EQ(eval("[$arg_z]", VarEscape::kDefault, true), "[-]");
  field("Cookie", "a=1; Session=xyz");
  field("cookie", "b=2;c=3");
  EXPECT_EQ(eval("$cookie_a|$cookie_session|$cookie_b|$cookie_c"), "1|xyz|2|3");
  EXPECT_EQ(eval("[$cookie_d]", VarEscape::kDefault, true), "[-]");
  r_->line.has_query = false;
  r_->line.query = {};
  EXPECT_EQ(eval("[$arg_x][$is_args]", VarEscape::kDefault, true), "[-][]");
}

TEST_F(Vars, ServerAndTime) {
  HttpSrvConf srv;
  srv.server_names = {"www.example.org", "example.org"};
  r_->srv = &srv;
  r_->line.version = 1001;
  EXPECT_EQ(eval("$server_name $server_protocol [$https]"), "www.example.org HTTP/1.1 []");
  EXPECT_EQ(eval("$msec"), "1795000000.250");
  field("Content-Type", "text/x");
  EXPECT_EQ(eval("$content_type [$content_length]"), "text/x []");
}

TEST_F(Vars, LimitStatuses) {
  EXPECT_EQ(eval("$limit_req_status $limit_conn_status", VarEscape::kDefault, true), "- -");
  r_->limit_req_status = LimitStatus::kDelayedDryRun;
  r_->limit_conn_status = LimitStatus::kRejected;
  EXPECT_EQ(eval("$limit_req_status $limit_conn_status"), "DELAYED_DRY_RUN REJECTED");
}

TEST_F(Vars, TlsFactsAreNotFoundWithoutTls) {
  EXPECT_EQ(eval("$ssl_session_id|$ssl_client_verify|$ssl_client_s_dn|$ssl_curve",
                 VarEscape::kDefault, true),
            "-|-|-|-");
}

TEST_F(Vars, ProxyAddXForwardedFor) {
  EXPECT_EQ(eval("$proxy_add_x_forwarded_for"), "10.1.2.3");
  field("X-Forwarded-For", "192.0.2.1");
  EXPECT_EQ(eval("$proxy_add_x_forwarded_for"), "192.0.2.1, 10.1.2.3");
}

TEST_F(Vars, Upstream) {
  EXPECT_EQ(eval("$upstream_addr", VarEscape::kDefault, true), "-");
  UpstreamTry& a = r_->upstream_tries[0];
  a = UpstreamTry{};  // as add_try starts an attempt
  std::memcpy(a.addr, "127.0.0.1:9001", 14);
  a.addr_len = 14;
  a.status = 0;
  a.time = 3;
  UpstreamTry& b = r_->upstream_tries[1];
  b = UpstreamTry{};
  std::memcpy(b.addr, "127.0.0.1:9002", 14);
  b.addr_len = 14;
  b.status = 200;
  b.time = 1500;
  r_->nupstream = 2;
  EXPECT_EQ(eval("$upstream_addr"), "127.0.0.1:9001, 127.0.0.1:9002");
  EXPECT_EQ(eval("$upstream_status"), "-, 200");
  EXPECT_EQ(eval("$upstream_response_time"), "-, -") << "neither attempt has ended";
  a.has_time = true;
  b.has_time = true;
  EXPECT_EQ(eval("$upstream_response_time"), "0.003, 1.500");
  b.connected = true;
  b.connect_time = 2;
  b.has_header = true;
  b.header_time = 1400;
  EXPECT_EQ(eval("$upstream_connect_time|$upstream_header_time"), "-, 0.002|-, 1.400");
}

TEST_F(Vars, Escaping) {
  field("X-V", "a\"b\\c\x01\xff");
  EXPECT_EQ(eval("$http_x_v", VarEscape::kNone), "a\"b\\c\x01\xff");
  EXPECT_EQ(eval("$http_x_v", VarEscape::kDefault), "a\\x22b\\x5Cc\\x01\\xFF");
  EXPECT_EQ(eval("$http_x_v", VarEscape::kJson), "a\\\"b\\\\c\\u0001\xff");
  // Literals are never escaped.
  EXPECT_EQ(eval("\"$http_x_v\"", VarEscape::kJson), "\"a\\\"b\\\\c\\u0001\xff\"");
}

// The default access log format written through a template gives the same
// bytes as the fixed writer the server uses for "combined".
TEST_F(Vars, CombinedMatchesFixedWriter) {
  field("Referer", "http://a/\"q\"");
  field("User-Agent", "agent \x7f");
  r_->status = 200;
  r_->sent_start = 0;
  r_->header_size = 100;
  c_.sent = 1100;
  std::string fixed;
  {
    char tmpl[] = "/tmp/vigil_vars_XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_NE(fd, -1);
    ::close(fd);
    AccessLog log(tmpl, 0, 1000);
    ASSERT_TRUE(log.open());
    Log elog;
    AccessLogLine l;
    l.remote_addr = c_.addr_text;
    l.request = r_->line.line;
    l.status = 200;
    l.body_bytes = 1000;
    l.referer = "http://a/\"q\"";
    l.user_agent = "agent \x7f";
    write_combined(log, l, elog);
    std::FILE* f = std::fopen(tmpl, "rb");
    ASSERT_NE(f, nullptr);
    char buf[1024];
    std::size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    ::unlink(tmpl);
    fixed.assign(buf, n);
  }
  std::string templated =
      eval(
          "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent "
          "\"$http_referer\" \"$http_user_agent\"",
          VarEscape::kDefault, true) +
      "\n";
  EXPECT_EQ(templated, fixed);
}

}  // namespace
}  // namespace vigil::http
