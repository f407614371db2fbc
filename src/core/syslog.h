#pragma once
// A syslog target of error_log and access_log (nginx's ngx_syslog.c):
//
//   syslog:server=address[:port][,facility=f][,severity=s][,tag=t][,nohostname]
//
// Each message is one RFC 3164 datagram, "<PRI>Mmm dd hh:mm:ss host tag: text",
// over a connected, non-blocking UDP socket made on the first send of each
// process. A send that fails loses that message: a log never blocks or fails
// its caller.

#include <sys/socket.h>

#include <memory>
#include <string>
#include <string_view>

#include "vigil/core/result.h"

namespace vigil {

class SyslogPeer {
 public:
  static constexpr std::string_view kPrefix = "syslog:";
  static constexpr int kDefaultPort = 514;
  static constexpr int kMaxTag = 32;

  // `target` is the whole argument, "syslog:..." included. The address is
  // resolved here (configuration time), never while sending.
  static Result<std::unique_ptr<SyslogPeer>> parse(std::string_view target);

  SyslogPeer() = default;
  ~SyslogPeer();
  SyslogPeer(const SyslogPeer&) = delete;
  SyslogPeer& operator=(const SyslogPeer&) = delete;

  // Sends `text` with severity `severity` (0 emerg .. 7 debug; -1: the
  // configured one, info unless "severity=" said otherwise).
  void send(int severity, std::string_view text);

  const std::string& target() const { return target_; }

 private:
  bool connect_socket();

  std::string target_;
  sockaddr_storage addr_{};
  socklen_t addrlen_ = 0;
  int fd_ = -1;
  int facility_ = 23;  // local7
  int severity_ = 6;   // info
  std::string tag_ = "nginx";
  bool nohostname_ = false;
  bool failed_ = false;  // the socket could not be made: reported once
};

// The host name a syslog header carries (gethostname(), read once).
std::string_view syslog_hostname();

}  // namespace vigil
