#pragma once
// The mail proxy's integration tests: a real vigil with a mail block, the
// Python peers of mail_peers.py (an auth_http server and IMAP/POP3/SMTP
// backends), and Python's imaplib/poplib/smtplib as the clients.

#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "integration/http_harness.h"
#include "test_process.h"

namespace vigil::test {

inline const std::string kMailPeers =
    std::string(VIGIL_SOURCE_DIR) + "/tests/integration/mail_peers.py";

class MailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    peers_ = std::make_unique<Process>(std::vector<std::string>{"python3", kMailPeers, "serve"});
    ASSERT_TRUE(peers_->wait_for_output("PORTS ", 15000)) << peers_->output();
    std::smatch m;
    const std::string out = peers_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("auth=(\\d+)"))) << out;
    auth_port_ = std::stoi(m[1]);
  }

  // The mail block's servers (and anything else for the block); the
  // auth_http address of the peers comes first.
  bool start(const std::string& mail, const std::string& main = "") {
    return server_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n" + main +
        "\nevents {\n worker_connections 256;" + with_test_backend("") +
        "\n}\nmail {\n auth_http 127.0.0.1:" + std::to_string(auth_port_) +
        "/auth;\n server_name proxy.test;\n" + mail + "\n}\n");
  }

  // Runs a client scenario of mail_peers.py against `port`; its exit code
  // and output.
  std::pair<int, std::string> client(const std::string& scenario, int port,
                                     const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{"python3", kMailPeers, scenario, std::to_string(port)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  }

  // Expects the scenario to succeed ("<SCENARIO> OK").
  void expect_client(const std::string& scenario, int port,
                     const std::vector<std::string>& extra = {}) {
    auto [rc, out] = client(scenario, port, extra);
    std::string upper = scenario;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(rc, 0) << out << "\n--- vigil:\n" << server_.output();
    EXPECT_NE(out.find(upper + " OK"), std::string::npos) << out;
  }

  // Waits until the peers (auth server, backends) logged `needle`.
  bool peers_saw(const std::string& needle, int timeout_ms = 5000) {
    return peers_->wait_for_output(needle, timeout_ms);
  }
  std::string peers_output() { return peers_->output(); }

  std::unique_ptr<Process> peers_;
  int auth_port_ = 0;
  VigilServer server_;
};

}  // namespace vigil::test
