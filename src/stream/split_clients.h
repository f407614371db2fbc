#pragma once
// split_clients in stream (nginx's ngx_stream_split_clients_module):
//
//   split_clients "${remote_addr}AAA" $variant { 51.2% one; 10% two; * three; }
//
// The block, the hash and the parts are http's (core/split_clients.h); the
// source is evaluated for the session reading the variable.

#include "core/conf/module.h"

namespace vigil::stream {

// The `split_clients` block of the stream main context (stream_conf.cc).
Status set_split_clients(const DirectiveCall& call);

}  // namespace vigil::stream
