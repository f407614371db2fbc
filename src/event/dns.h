#pragma once
// DNS messages for the stub resolver (RFC 1035 §4): building a query and
// parsing a reply to it. Pure functions over byte buffers, no allocation:
// the reply's names are read with their compression pointers (§4.1.4),
// every offset bounds-checked, the pointer chain bounded. Fuzzed
// (tests/fuzz/dns_response_fuzz.cc).

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vigil::dns {

inline constexpr std::uint16_t kTypeA = 1;
inline constexpr std::uint16_t kTypeCname = 5;
inline constexpr std::uint16_t kTypePtr = 12;
inline constexpr std::uint16_t kTypeAaaa = 28;

// RFC 1035 §4.1.1 RCODEs the resolver reports as they are.
inline constexpr int kFormErr = 1;
inline constexpr int kServFail = 2;
inline constexpr int kNxDomain = 3;
inline constexpr int kNotImp = 4;
inline constexpr int kRefused = 5;

inline constexpr std::size_t kMaxName = 255;  // a name as text, without the final dot
inline constexpr std::size_t kMaxAddrs = 16;  // addresses kept from one reply
inline constexpr std::size_t kMaxUdp = 512;   // RFC 1035 §4.2.1

struct Address {
  int family = 0;  // AF_INET or AF_INET6
  std::uint8_t bytes[16] = {};
};

// The socket address of `a` with `port` into out; its length.
socklen_t to_sockaddr(const Address& a, std::uint16_t port, sockaddr_storage& out);

// Writes a recursive query for `name` (dotted, no final dot needed) of
// `qtype` with `id` into buf. Returns its length, 0 when the name is not a
// valid domain name or the buffer is too small.
std::size_t build_query(std::uint8_t* buf, std::size_t cap, std::uint16_t id,
                        std::string_view name, std::uint16_t qtype);

// The name an address is looked up by with PTR (RFC 1035 §3.5,
// RFC 3596 §2.5): "4.3.2.1.in-addr.arpa" or the ip6.arpa nibbles. Returns
// the length written into out (at least 73 bytes), 0 for another family.
std::size_t reverse_name(const Address& a, char* out, std::size_t cap);

enum class Parse : std::uint8_t {
  kOk,           // a reply to the query: see rcode, addresses, cname, ptr
  kShort,        // shorter than a header, or a section runs past the end
  kNotReply,     // QR is 0, or the opcode is not QUERY
  kIdMismatch,   // not the id we sent
  kQuestionMismatch,  // not our question (name, type or class)
  kBadName,      // a malformed name (pointer loop, label past the end, too long)
};

struct Reply {
  int rcode = 0;
  bool truncated = false;  // TC: ask again over TCP
  std::uint32_t ttl = 0;   // the smallest TTL of the records used
  std::size_t naddrs = 0;
  Address addrs[kMaxAddrs];
  // The CNAME the question's name leads to when no address of the asked
  // type came with it (the caller asks again for this name).
  char cname[kMaxName + 1] = {};
  std::size_t cname_len = 0;
  // The first PTR name (a PTR question).
  char ptr[kMaxName + 1] = {};
  std::size_t ptr_len = 0;
  // Records for the question's name (or its CNAME chain) came, but none of
  // the asked type nor a CNAME (a DNAME owned by the name itself, say): the
  // reply does not answer the question.
  bool other_types = false;
};

// Parses the reply in [p, p+n) to the query (id, name, qtype). Answers are
// taken for the question's name and for the CNAMEs it leads to within the
// reply (at most 8 in a chain); other records are ignored.
Parse parse_reply(const std::uint8_t* p, std::size_t n, std::uint16_t id, std::string_view name,
                  std::uint16_t qtype, Reply& out);

// Reads the (possibly compressed) name at `off` of the message into out
// (lowercase, dotted, no final dot); `next` is the offset after it in the
// message. False when malformed.
bool read_name(const std::uint8_t* p, std::size_t n, std::size_t off, char* out,
               std::size_t& out_len, std::size_t& next);

// Names compare without regard to ASCII case (RFC 4343), a final dot ignored.
bool same_name(std::string_view a, std::string_view b);

}  // namespace vigil::dns
