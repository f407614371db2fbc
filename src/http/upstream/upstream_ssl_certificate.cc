#include "http/upstream/upstream_ssl_certificate.h"

#include <new>
#include <string>
#include <utility>

#include "event/tls/certificate.h"
#include "event/tls/context.h"
#include "event/tls/tls_conf.h"
#include "http/core/ssl_certificate.h"
#include "http/core/variables.h"
#include "http/upstream/upstream.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil::http::upstream_core {
namespace {

class ClientNames final : public TlsCertificateNames {
 public:
  ClientNames(VarTemplate cert, VarTemplate key) : cert_(std::move(cert)), key_(std::move(key)) {}

  // `u` is the upstream connection; its data is the Upstream of the request.
  bool evaluate(Connection& u, std::size_t, std::string& cert, std::string& key) const override {
    auto* us = static_cast<Upstream*>(u.data);
    if (us == nullptr || us->r == nullptr) return false;
    if (!evaluate_certificate_name(cert_, *us->r, cert) ||
        !evaluate_certificate_name(key_, *us->r, key)) {
      VIGIL_LOG(*u.log, kAlert, 0, "*%llu out of memory for a certificate name",
                static_cast<unsigned long long>(u.number));
      return false;
    }
    return true;
  }

 private:
  VarTemplate cert_;
  VarTemplate key_;
};

}  // namespace

Status set_client_certificate_names(TlsContext& ctx, const TlsClientConf& conf) {
  if (!conf.certificate_variables()) return Status::ok();
  auto cert = VarTemplate::compile(conf.certificate);
  if (!cert) return Status::error(cert.status().message() + conf.where);
  auto key = VarTemplate::compile(conf.certificate_key);
  if (!key) return Status::error(key.status().message() + conf.where);
  ctx.set_certificate_names(std::unique_ptr<TlsCertificateNames>(
      new (std::nothrow) ClientNames(std::move(cert.value()), std::move(key.value()))));
  if (ctx.certificate_names() == nullptr) return Status::error("out of memory" + conf.where);
  return Status::ok();
}

}  // namespace vigil::http::upstream_core
