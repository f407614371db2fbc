#pragma once
// The shared cache of client certificate statuses (nginx's ssl_ocsp_cache
// shared:name:size): each answer of a responder about a certificate, kept
// until its nextUpdate (an hour when it has none) in a named shared zone,
// so every worker skips the request while it is valid. Entries are found
// through a red-black tree keyed by a hash of the certificate's id (the
// SHA-1 of its issuer's name and key, and its serial number); when the zone
// is full the oldest entry makes room. The zone survives a reload.

#include <openssl/x509.h>

#include <cstddef>
#include <ctime>
#include <string>

#include "core/conf/module.h"
#include "core/shm_zone.h"

namespace vigil {

class Log;

inline constexpr std::size_t kOcspKeySize = 60;

// Registers the zone for "shared:name:size" while the directive is parsed.
Result<ShmZone*> tls_ocsp_zone(const DirectiveCall& call, const std::string& name,
                               std::size_t size);

// The key of `cert` issued by `issuer`; false when it cannot be made (a
// serial number longer than 20 bytes, a digest that failed).
bool ocsp_cache_key(X509* cert, X509* issuer, unsigned char key[kOcspKeySize]);

// True with `status` (V_OCSP_CERTSTATUS_*) when the zone has a valid entry;
// an expired one is dropped.
bool ocsp_cache_lookup(ShmZone& zone, const unsigned char key[kOcspKeySize], int& status);

// Stores the status until `valid` (kOcspForever: an hour). False when there
// is no room even after dropping the oldest entry (logged at alert).
bool ocsp_cache_store(ShmZone& zone, const unsigned char key[kOcspKeySize], int status,
                      std::time_t valid, Log& log);

}  // namespace vigil
