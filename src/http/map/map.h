#pragma once
// map $source $variable { ... } (map.cc).

namespace vigil::http {

class HttpModule;
const HttpModule& map_module();

}  // namespace vigil::http
