#include "core/cidr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace vigil {

namespace {

bool parse_network(std::string_view text, Cidr& c) {
  const std::size_t slash = text.find('/');
  const std::string_view a = text.substr(0, slash);
  char buf[INET6_ADDRSTRLEN];
  if (a.empty() || a.size() >= sizeof buf) return false;
  std::memcpy(buf, a.data(), a.size());
  buf[a.size()] = '\0';
  int bits;
  if (::inet_pton(AF_INET, buf, c.addr) == 1) {
    c.family = AF_INET;
    bits = 32;
  } else if (::inet_pton(AF_INET6, buf, c.addr) == 1) {
    c.family = AF_INET6;
    bits = 128;
  } else {
    return false;
  }
  int prefix = bits;
  if (slash != std::string_view::npos) {
    const std::string_view p = text.substr(slash + 1);
    if (p.empty() || p.size() > 3) return false;
    prefix = 0;
    for (char ch : p) {
      if (ch < '0' || ch > '9') return false;
      prefix = prefix * 10 + (ch - '0');
    }
    if (prefix > bits) return false;
  }
  for (int i = 0; i < bits / 8; ++i) {
    const int left = prefix - i * 8;
    c.mask[i] = left >= 8 ? 0xFF : left <= 0 ? 0 : static_cast<std::uint8_t>(0xFF << (8 - left));
    c.addr[i] &= c.mask[i];  // bits outside the prefix mean nothing
  }
  return true;
}

}  // namespace

bool parse_cidr_or_host(std::string_view text, std::vector<Cidr>& out, std::string& error) {
  Cidr c;
  if (text == "unix:") {
    c.family = AF_UNIX;  // every unix-domain peer
    out.push_back(c);
    return true;
  }
  if (parse_network(text, c)) {
    out.push_back(c);
    return true;
  }
  const std::string host(text);
  if (host.empty() || host == "all" || host.find('/') != std::string::npos ||
      host.starts_with("unix:")) {
    error = "invalid parameter \"" + host + "\"";
    return false;
  }
  ::addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  ::addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    error = "host not found in set_real_ip_from \"" + host + "\"";
    return false;
  }
  for (const ::addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Cidr r;
    if (ai->ai_family == AF_INET) {
      r.family = AF_INET;
      std::memcpy(r.addr, &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
      std::memset(r.mask, 0xFF, 4);
    } else if (ai->ai_family == AF_INET6) {
      r.family = AF_INET6;
      std::memcpy(r.addr, &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
      std::memset(r.mask, 0xFF, 16);
    } else {
      continue;
    }
    out.push_back(r);
  }
  ::freeaddrinfo(res);
  return true;
}

bool cidr_match(const std::vector<Cidr>& list, const sockaddr* sa) {
  if (sa == nullptr) return false;
  const std::uint8_t* a = nullptr;
  int family = sa->sa_family;
  if (family == AF_INET) {
    a = reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
  } else if (family == AF_INET6) {
    const auto* in6 = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    a = reinterpret_cast<const std::uint8_t*>(in6);
    if (IN6_IS_ADDR_V4MAPPED(in6)) {
      family = AF_INET;
      a += 12;
    }
  } else if (family == AF_UNIX) {
    for (const Cidr& c : list) {
      if (c.family == AF_UNIX) return true;
    }
    return false;
  } else {
    return false;
  }
  const int n = family == AF_INET ? 4 : 16;
  for (const Cidr& c : list) {
    if (c.family != family) continue;
    bool match = true;
    for (int i = 0; i < n && match; ++i) match = (a[i] & c.mask[i]) == c.addr[i];
    if (match) return true;
  }
  return false;
}

}  // namespace vigil
