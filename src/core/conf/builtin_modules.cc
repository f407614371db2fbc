// The list of modules the program is built with (nginx generates this as
// objs/ngx_modules.c). It is the one place core names a module of a higher
// layer, which is why it lives apart from the loader.

#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "core/core_module.h"
#include "event/event_conf.h"
#include "http/conf.h"
#include "stream/stream_conf.h"

namespace vigil {

const ModuleRegistry& ModuleRegistry::builtin() {
  static const ModuleRegistry registry{&core_module(), &event_module(), &http::http_module(),
                                         &stream::stream_module()};
  return registry;
}

const CoreConf& Configuration::core() const {
  return get<CoreConf>(core_module());
}

const EventConf& Configuration::events() const {
  return get<EventConf>(event_module());
}

}  // namespace vigil
