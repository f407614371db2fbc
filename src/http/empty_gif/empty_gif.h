#pragma once
// empty_gif: a location that answers with a 1x1 transparent GIF (empty_gif.cc).

namespace vigil::http {

class HttpModule;
const HttpModule& empty_gif_module();

}  // namespace vigil::http
