#pragma once
// geo [$address] $variable { ... } (geo.cc).

namespace vigil::http {

class HttpModule;
const HttpModule& geo_module();

}  // namespace vigil::http
