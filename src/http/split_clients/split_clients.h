#pragma once
// split_clients $source $variable { percent value; ... * value; } (split_clients.cc;
// the block and the hash: core/split_clients.h).

namespace vigil::http {

class HttpModule;
const HttpModule& split_clients_module();

}  // namespace vigil::http
