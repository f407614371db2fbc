#include "stream/ssl_certificate.h"

#include <new>
#include <utility>
#include <vector>

#include "stream/session.h"
#include "stream/variables.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil::stream {
namespace {

class SessionNames final : public TlsCertificateNames {
 public:
  explicit SessionNames(std::vector<std::pair<VarTemplate, VarTemplate>> pairs)
      : pairs_(std::move(pairs)) {}

  bool evaluate(Connection& c, std::size_t i, std::string& cert, std::string& key) const override {
    auto* s = static_cast<Session*>(c.data);
    if (s == nullptr || i >= pairs_.size()) return false;
    std::string_view cv;
    std::string_view kv;
    if (!pairs_[i].first.evaluate(*s, cv) || !pairs_[i].second.evaluate(*s, kv)) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a certificate name",
                static_cast<unsigned long long>(c.number));
      return false;
    }
    try {
      cert.assign(cv);
      key.assign(kv);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }

 private:
  std::vector<std::pair<VarTemplate, VarTemplate>> pairs_;
};

}  // namespace

Result<std::unique_ptr<TlsCertificateNames>> certificate_names(
    const std::vector<std::string>& certs, const std::vector<std::string>& keys,
    const std::string& where) {
  std::vector<std::pair<VarTemplate, VarTemplate>> pairs;
  for (std::size_t i = 0; i < certs.size() && i < keys.size(); ++i) {
    auto cert = VarTemplate::compile(certs[i]);
    if (!cert) return Status::error(cert.status().message() + where);
    auto key = VarTemplate::compile(keys[i]);
    if (!key) return Status::error(key.status().message() + where);
    pairs.emplace_back(std::move(cert.value()), std::move(key.value()));
  }
  return std::unique_ptr<TlsCertificateNames>(new SessionNames(std::move(pairs)));
}

}  // namespace vigil::stream
