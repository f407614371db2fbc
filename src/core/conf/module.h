#pragma once
// Modules own directives and typed configuration structs (nginx's
// ngx_module_t + ngx_command_t + create_conf/init_conf/merge_conf).
//
// A module declares:
//   - conf specs: "I keep a struct Conf in every scope of these contexts"
//     (add_conf<Conf>(created_in, init, merge)). The loader default-constructs
//     it when such a scope opens (create_conf), then, when the scope closes,
//     fills the declared defaults of directives not set there and calls init.
//   - directives: name, allowed contexts, arity, and a body that parses the
//     arguments into one field of one of its confs. Typed slot helpers
//     (ConfSlot<Conf>::flag/number/size/msec/sec/string/one_of) cover the
//     common cases and carry the default, so most directives need no code.
//   - block directives: add_block("box", kMainConf, Arity::none(), kBoxConf)
//     makes the loader open a child scope of that context, create the confs
//     of every module that keeps one there, parse the block into it and
//     finish it. A block directive with opens == 0 instead parses its block
//     itself (call.parse_block(its own StatementSink)), which is how a block
//     of free-form lines ("types { text/html html; }") can be done.
//
// Duplicates: a directive may appear once per scope unless `multiple` is set.
// `required` makes its absence an error when the scope closes ('no "box"
// section in configuration').
//
// Core names no context but main: a module declares its own bits and nests
// blocks with them. A protocol with three levels looks like this:
//   constexpr ConfContextMask kBoxMain = 1u << 20, kBoxSrv = 1u << 21, kBoxLoc = 1u << 22;
//   Module box("box");
//   box.add_block("box", kMainConf, Arity::none(), kBoxMain);
//   box.add_block("server", kBoxMain, Arity::none(), kBoxSrv).multiple = true;
//   box.add_block("location", kBoxSrv | kBoxLoc, Arity::between(1, 2), kBoxLoc)
//       .multiple = true;                                 // scope.args() holds "/x"
//   auto main = box.add_conf<BoxMainConf>(kBoxMain, init_main);
//   auto srv  = box.add_conf<BoxSrvConf>(kBoxMain | kBoxSrv, {}, merge_srv);
//   auto loc  = box.add_conf<BoxLocConf>(kBoxMain | kBoxSrv | kBoxLoc, {}, merge_loc);
//   box.add("sendfile", kBoxMain | kBoxSrv | kBoxLoc, Arity::on_off(),
//           loc.flag(&BoxLocConf::sendfile, false));
//   box.add("listen", kBoxSrv, Arity::one_or_more(), srv.custom(parse_listen))
//       .multiple = true;
// "sendfile" in a server block writes that server's BoxLocConf (the nearest
// scope holding the spec). When the box scope closes — the outermost scope
// holding each spec, its "root" — the loader applies defaults and init to the
// root conf, then walks the descendants top-down: for every slot directive a
// child did not set it copies the parent's value (ngx_conf_merge_*_value), then
// calls merge(parent, child) for what slots cannot express. init is never
// called on descendants: merge finishes them. This runs after the whole box
// block is parsed, so "box { server { } sendfile on; }" still reaches the
// server, as in nginx.

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/conf/parser.h"
#include "core/conf/scope.h"
#include "core/conf/values.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

struct Directive;

// How many arguments (after the name) a directive takes.
struct Arity {
  static constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();
  std::size_t min = 0;
  std::size_t max = 0;

  static constexpr Arity none() { return {0, 0}; }
  static constexpr Arity exactly(std::size_t n) { return {n, n}; }
  static constexpr Arity between(std::size_t lo, std::size_t hi) { return {lo, hi}; }
  static constexpr Arity on_off() { return {1, 1}; }  // nginx's NGX_CONF_FLAG
  static constexpr Arity one_or_more() { return {1, kUnbounded}; }
  static constexpr Arity at_least(std::size_t n) { return {n, kUnbounded}; }
  constexpr bool accepts(std::size_t n) const { return n >= min && n <= max; }
};

// One directive occurrence, as its body sees it.
class DirectiveCall {
 public:
  DirectiveCall(const Directive& directive, const ConfStatement& statement, ConfParser& parser,
                StatementSink& sink, ConfScope& scope, const ConfEnv& env)
      : directive_(directive),
        st_(statement),
        parser_(parser),
        sink_(sink),
        scope_(scope),
        env_(env) {}

  const Directive& directive() const { return directive_; }
  const std::string& name() const { return st_.words[0].text; }
  std::size_t arg_count() const { return st_.words.size() - 1; }
  // Arguments after the name, from 0.
  const std::string& arg(std::size_t i) const { return st_.words[i + 1].text; }
  std::vector<std::string> args() const;
  std::uint32_t line() const { return st_.words[0].line; }
  // " in F:L" (or " in command line") of the directive's name.
  std::string where() const { return parser_.origin().where(line()); }

  // `message` + where().
  Status error(std::string_view message) const;
  // 'invalid value "ARG" in "NAME" directive' + detail + where().
  Status invalid_value(std::size_t i, std::string_view detail = {}) const;

  ConfParser& parser() const { return parser_; }
  // The sink of the current scope: an include parses into it.
  StatementSink& sink() const { return sink_; }
  ConfScope& scope() const { return scope_; }
  const ConfEnv& env() const { return env_; }
  // The configuration's shared zones (core/shm_zone.h): register one with
  // zones().add(name, size, &kTag, where()).
  SharedZones& zones() const { return *env_.zones; }
  // The configuration's error logs below main (core/error_logs.h).
  ErrorLogs& error_logs() const { return *env_.error_logs; }
  // For block directives that parse their own block (opens == 0).
  Status parse_block(StatementSink& sink) const { return parser_.parse_block(sink); }

 private:
  const Directive& directive_;
  const ConfStatement& st_;
  ConfParser& parser_;
  StatementSink& sink_;
  ConfScope& scope_;
  const ConfEnv& env_;
};

// What a directive does with its arguments: which conf it writes, how, and
// (for slot helpers) its default and how a child scope inherits it.
struct DirectiveBody {
  int spec = -1;  // index of the owning module's conf spec; -1: writes no conf
  const std::type_info* conf_type = nullptr;
  std::function<Status(const DirectiveCall&, void* conf)> set;   // conf null when spec < 0
  std::function<void(void* conf)> apply_default;                 // slot helpers only
  std::function<void(const void* parent, void* child)> inherit;  // slot helpers only

  // A body that keeps no conf (include, or a block that only opens a scope).
  static DirectiveBody handler(std::function<Status(const DirectiveCall&)> fn);
};

struct Directive {
  std::string name;
  ConfContextMask contexts = 0;  // where it is allowed
  Arity arity;
  DirectiveBody body;
  bool block = false;         // takes "{ ... }"
  ConfContextMask opens = 0;  // block: the context the loader opens; 0: body parses the block
  bool multiple = false;      // may repeat in one scope
  bool required = false;      // must appear in every scope of `contexts`
};

// A module's conf kind, type-erased.
struct ConfSpec {
  ConfContextMask created_in = 0;
  const std::type_info* type = nullptr;
  std::function<std::shared_ptr<void>()> create;
  std::function<Status(const ConfInit&, void* conf)> init;
  std::function<Status(const ConfInit&, const void* parent, void* child)> merge;
};

// A typed handle on one conf spec of a module; its helpers build directive
// bodies that write a field of that Conf, so a directive can only ever write
// the struct its module declared.
template <class Conf>
class ConfSlot {
 public:
  explicit ConfSlot(int index) : index_(index) {}
  int index() const { return index_; }

  // on | off
  DirectiveBody flag(bool Conf::*field, bool def) const {
    return make<bool>(field, def, [](const DirectiveCall& call, bool* out) {
      auto v = parse_flag(call.arg(0));
      if (!v) return call.invalid_value(0, ", it must be \"on\" or \"off\"");
      *out = *v;
      return Status::ok();
    });
  }

  // A plain decimal number within [min, max].
  template <class T>
  DirectiveBody number(T Conf::*field, T def, T min = 0,
                       T max = std::numeric_limits<T>::max()) const {
    return make<T>(field, def, [min, max](const DirectiveCall& call, T* out) {
      auto v = parse_number(call.arg(0));
      if (!v || std::cmp_less(*v, min) || std::cmp_greater(*v, max)) return call.invalid_value(0);
      *out = static_cast<T>(*v);
      return Status::ok();
    });
  }

  // A size: "512", "16k", "1m", "1g".
  DirectiveBody size(std::size_t Conf::*field, std::size_t def, std::size_t min = 0) const {
    return make<std::size_t>(field, def, [min](const DirectiveCall& call, std::size_t* out) {
      auto v = parse_size(call.arg(0));
      if (!v || *v < min || *v > std::numeric_limits<std::size_t>::max()) {
        return call.invalid_value(0);
      }
      *out = static_cast<std::size_t>(*v);
      return Status::ok();
    });
  }

  // A time in milliseconds: "500ms", "1m30s", "2" (seconds).
  DirectiveBody msec(Msec Conf::*field, Msec def) const {
    return make<Msec>(field, def, [](const DirectiveCall& call, Msec* out) {
      auto v = parse_msec(call.arg(0));
      if (!v) return call.invalid_value(0);
      *out = *v;
      return Status::ok();
    });
  }

  // A time in whole seconds: "1h", "30".
  template <class T>
  DirectiveBody sec(T Conf::*field, T def) const {
    return make<T>(field, def, [](const DirectiveCall& call, T* out) {
      auto v = parse_sec(call.arg(0));
      if (!v || std::cmp_greater(*v, std::numeric_limits<T>::max())) return call.invalid_value(0);
      *out = static_cast<T>(*v);
      return Status::ok();
    });
  }

  // Any text; `allow_empty` false rejects "".
  DirectiveBody string(std::string Conf::*field, std::string def, bool allow_empty = true) const {
    return make<std::string>(field, std::move(def),
                             [allow_empty](const DirectiveCall& call, std::string* out) {
                               if (!allow_empty && call.arg(0).empty()) {
                                 return call.invalid_value(0);
                               }
                               *out = call.arg(0);
                               return Status::ok();
                             });
  }

  // One of a fixed set of names (case-insensitive, as nginx's enum slot).
  template <class T>
  DirectiveBody one_of(T Conf::*field, T def,
                       std::vector<std::pair<std::string, T>> choices) const {
    std::string hint = ", it must be ";
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (i > 0) hint += i + 1 == choices.size() ? " or " : ", ";
      hint += "\"" + choices[i].first + "\"";
    }
    return make<T>(field, std::move(def),
                   [choices = std::move(choices), hint](const DirectiveCall& call, T* out) {
                     for (const auto& [name, value] : choices) {
                       if (conf::iequals(name, call.arg(0))) {
                         *out = value;
                         return Status::ok();
                       }
                     }
                     return call.invalid_value(0, hint);
                   });
  }

  // Anything else: the handler parses the arguments into the conf itself.
  // There is no declared default; init_conf uses ConfInit::is_set().
  DirectiveBody custom(std::function<Status(const DirectiveCall&, Conf&)> fn) const {
    DirectiveBody b;
    b.spec = index_;
    b.conf_type = &typeid(Conf);
    b.set = [fn = std::move(fn)](const DirectiveCall& call, void* conf) {
      return fn(call, *static_cast<Conf*>(conf));
    };
    return b;
  }

 private:
  template <class T, class Parse>
  DirectiveBody make(T Conf::*field, T def, Parse parse) const {
    DirectiveBody b;
    b.spec = index_;
    b.conf_type = &typeid(Conf);
    b.set = [field, parse = std::move(parse)](const DirectiveCall& call, void* conf) {
      T value{};
      Status s = parse(call, &value);
      if (!s) return s;
      static_cast<Conf*>(conf)->*field = std::move(value);
      return Status::ok();
    };
    b.apply_default = [field, def = std::move(def)](void* conf) {
      static_cast<Conf*>(conf)->*field = def;
    };
    b.inherit = [field](const void* parent, void* child) {
      static_cast<Conf*>(child)->*field = static_cast<const Conf*>(parent)->*field;
    };
    return b;
  }

  int index_;
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Declares that this module keeps a Conf in every scope of `created_in`.
  template <class Conf>
  ConfSlot<Conf> add_conf(ConfContextMask created_in,
                          std::function<Status(const ConfInit&, Conf&)> init = {},
                          std::function<Status(const ConfInit&, const Conf&, Conf&)> merge = {}) {
    ConfSpec spec;
    spec.created_in = created_in;
    spec.type = &typeid(Conf);
    spec.create = [] { return std::static_pointer_cast<void>(std::make_shared<Conf>()); };
    if (init) {
      spec.init = [init = std::move(init)](const ConfInit& ctx, void* conf) {
        return init(ctx, *static_cast<Conf*>(conf));
      };
    }
    if (merge) {
      spec.merge = [merge = std::move(merge)](const ConfInit& ctx, const void* parent,
                                              void* child) {
        return merge(ctx, *static_cast<const Conf*>(parent), *static_cast<Conf*>(child));
      };
    }
    confs_.push_back(std::move(spec));
    return ConfSlot<Conf>(static_cast<int>(confs_.size() - 1));
  }

  // The returned reference is valid until the next add.
  Directive& add(std::string name, ConfContextMask contexts, Arity arity, DirectiveBody body);
  Directive& add_block(std::string name, ConfContextMask contexts, Arity arity,
                       ConfContextMask opens, DirectiveBody body = {});

  const std::string& name() const { return name_; }
  const std::vector<ConfSpec>& confs() const { return confs_; }
  const std::vector<Directive>& directives() const { return directives_; }

 private:
  std::string name_;
  std::vector<ConfSpec> confs_;
  std::vector<Directive> directives_;
};

// The modules a load knows, in order: directive lookup, conf creation and
// init all follow it.
class ModuleRegistry {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  ModuleRegistry() = default;
  ModuleRegistry(std::initializer_list<const Module*> modules) : modules_(modules) {}
  void add(const Module& module) { modules_.push_back(&module); }
  const std::vector<const Module*>& modules() const { return modules_; }
  std::size_t index_of(const Module& module) const;

 private:
  std::vector<const Module*> modules_;
};

}  // namespace vigil
