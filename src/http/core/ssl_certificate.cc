#include "http/core/ssl_certificate.h"

#include <new>
#include <string>
#include <utility>
#include <vector>

#include "event/tls/tls_conf.h"
#include "http/core/conf.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"
#include "http/core/worker.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil::http {

bool evaluate_certificate_name(const VarTemplate& t, const Request& r, std::string& out) {
  try {
    out.resize(t.length(r));
  } catch (const std::bad_alloc&) {
    return false;
  }
  char* end = t.write(r, out.data());
  out.resize(static_cast<std::size_t>(end - out.data()));
  return true;
}

namespace {

class ServerNames final : public TlsCertificateNames {
 public:
  explicit ServerNames(std::vector<std::pair<VarTemplate, VarTemplate>> pairs)
      : pairs_(std::move(pairs)) {}

  bool evaluate(Connection& c, std::size_t i, std::string& cert, std::string& key) const override {
    if (i >= pairs_.size()) return false;
    auto* hc = static_cast<HttpConnection*>(c.data);
    if (hc == nullptr || hc->worker == nullptr || hc->srv == nullptr) return false;
    // A request of the server SNI chose, with nothing read yet: what the
    // connection knows is what the variables see (nginx's fake request).
    Request* r = hc->worker->get_request();
    if (r == nullptr) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a request",
                static_cast<unsigned long long>(c.number));
      return false;
    }
    std::destroy_at(r);
    std::construct_at(r);
    r->hc = hc;
    r->c = &c;
    r->srv = hc->srv;
    r->loc = hc->srv->loc;
    r->fields = r->field_inline;
    r->start_msec = clock::current_msec();
    const bool ok = evaluate_certificate_name(pairs_[i].first, *r, cert) &&
                    evaluate_certificate_name(pairs_[i].second, *r, key);
    release_request_vars(*r);
    hc->worker->put_request(r);
    if (!ok) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a certificate name",
                static_cast<unsigned long long>(c.number));
    }
    return ok;
  }

 private:
  std::vector<std::pair<VarTemplate, VarTemplate>> pairs_;
};

}  // namespace

Result<std::unique_ptr<TlsCertificateNames>> server_certificate_names(const TlsServerConf& conf) {
  std::vector<std::pair<VarTemplate, VarTemplate>> pairs;
  for (std::size_t i = 0; i < conf.certificates.size() && i < conf.keys.size(); ++i) {
    const std::string& where =
        i < conf.certificate_where.size() ? conf.certificate_where[i] : conf.where;
    auto cert = VarTemplate::compile(conf.certificates[i]);
    if (!cert) return Status::error(cert.status().message() + where);
    auto key = VarTemplate::compile(conf.keys[i]);
    if (!key) return Status::error(key.status().message() + where);
    pairs.emplace_back(std::move(cert.value()), std::move(key.value()));
  }
  return std::unique_ptr<TlsCertificateNames>(new ServerNames(std::move(pairs)));
}

}  // namespace vigil::http
