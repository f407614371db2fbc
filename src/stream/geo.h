#pragma once
// geo in stream (nginx's ngx_stream_geo_module):
//
//   geo [$address] $variable {
//     [ranges;] default value;  include file;  delete network;
//     network value;  a.b.c.d-e.f.g.h value;  (with ranges)
//   }
//
// The block and the lookup are http's (core/geo_block.h), without `proxy`
// (nginx's stream geo has none). The address is the session's client
// (after realip), or $address's value when given.

#include "core/conf/module.h"

namespace vigil::stream {

// The `geo` block of the stream main context (stream_conf.cc).
Status set_geo(const DirectiveCall& call);

}  // namespace vigil::stream
