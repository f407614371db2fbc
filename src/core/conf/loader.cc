#include "core/conf/loader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include "core/core_module.h"

namespace vigil {

namespace {

constexpr std::string_view kDefaultConfPath = "conf/vigil.conf";
constexpr std::string_view kEmbeddedName = "conf/vigil.conf (embedded)";

// "conf/vigil.conf" -> "conf/", "vigil.conf" -> "", "/vigil.conf" -> "/".
std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// Dispatches statements to directives, and runs create/init/merge around
// scopes: nginx's ngx_conf_handler plus what each block handler does there.
class Loader {
 public:
  Loader(const ModuleRegistry& registry, const ConfEnv& env) : registry_(registry), env_(env) {}

  // create_conf for every module that keeps a conf in this scope's context.
  void open_scope(ConfScope& scope) const;
  // Required directives, then defaults + init_conf (+ merges below) for each
  // conf this scope is the outermost holder of.
  Status close_scope(ConfScope& scope) const;
  Status dispatch(ConfParser& parser, ConfScope& scope, StatementSink& sink,
                  const ConfStatement& st) const;

 private:
  Status finish_root(ConfScope& scope, std::size_t module, int spec) const;
  Status merge_down(const void* parent_conf, ConfScope& scope, std::size_t module, int spec) const;

  const ModuleRegistry& registry_;
  const ConfEnv& env_;
};

class ScopeSink : public StatementSink {
 public:
  ScopeSink(const Loader& loader, ConfScope& scope) : loader_(loader), scope_(scope) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    return loader_.dispatch(parser, scope_, *this, st);
  }

 private:
  const Loader& loader_;
  ConfScope& scope_;
};

void Loader::open_scope(ConfScope& scope) const {
  const auto& modules = registry_.modules();
  for (std::size_t m = 0; m < modules.size(); ++m) {
    const auto& specs = modules[m]->confs();
    for (std::size_t s = 0; s < specs.size(); ++s) {
      if (specs[s].created_in & scope.context()) {
        scope.set_conf(m, static_cast<int>(s), specs[s].create());
      }
    }
  }
}

Status Loader::dispatch(ConfParser& parser, ConfScope& scope, StatementSink& sink,
                        const ConfStatement& st) const {
  const std::string& name = st.words[0].text;
  std::string where = parser.origin().where(st.words[0].line);

  // Same lookup as nginx: a name may exist in several modules for different
  // contexts; only when none allows this context is it "not allowed here".
  const Directive* directive = nullptr;
  std::size_t module = 0;
  bool known = false;
  const auto& modules = registry_.modules();
  for (std::size_t m = 0; m < modules.size() && directive == nullptr; ++m) {
    for (const Directive& d : modules[m]->directives()) {
      if (d.name != name) continue;
      known = true;
      if (d.contexts & scope.context()) {
        directive = &d;
        module = m;
        break;
      }
    }
  }
  if (directive == nullptr) {
    if (known) return Status::error("\"" + name + "\" directive is not allowed here" + where);
    return Status::error("unknown directive \"" + name + "\"" + where);
  }
  const Directive& d = *directive;

  if (!d.block && st.end != ConfTerminator::kSemicolon) {
    return Status::error("directive \"" + name + "\" is not terminated by \";\"" + where);
  }
  if (d.block && st.end != ConfTerminator::kBlockStart) {
    return Status::error("directive \"" + name + "\" has no opening \"{\"" + where);
  }
  if (!d.arity.accepts(st.words.size() - 1)) {
    return Status::error("invalid number of arguments in \"" + name + "\" directive" + where);
  }

  // The directive writes the conf of the nearest scope holding its spec, and
  // "duplicate" is judged in that scope.
  ConfScope* owner = &scope;
  void* conf = nullptr;
  if (d.body.spec >= 0) {
    owner = scope.owner_of(module, d.body.spec);
    if (owner == nullptr) {
      return Status::error("internal error: \"" + name + "\" directive has no configuration here" +
                           where);
    }
    conf = owner->conf(module, d.body.spec);
  }
  if (!d.multiple && owner->find_set(name) != nullptr) {
    return Status::error("\"" + name + "\" directive is duplicate" + where);
  }
  owner->mark_set(name, {where});

  DirectiveCall call(d, st, parser, sink, scope, env_);
  if (d.block && d.opens != 0) {
    ConfScope& child = scope.add_child(d.opens, where, call.args());
    open_scope(child);
    if (d.body.set) {
      Status s = d.body.set(call, conf);
      if (!s) return s;
    }
    ScopeSink child_sink(*this, child);
    Status s = parser.parse_block(child_sink);
    if (!s) return s;
    return close_scope(child);
  }
  if (!d.body.set) {
    return Status::error("internal error: \"" + name + "\" directive has no handler" + where);
  }
  return d.body.set(call, conf);
}

Status Loader::close_scope(ConfScope& scope) const {
  const auto& modules = registry_.modules();
  for (const Module* m : modules) {
    for (const Directive& d : m->directives()) {
      if (d.required && (d.contexts & scope.context()) && scope.find_set(d.name) == nullptr) {
        return Status::error("no \"" + d.name + "\" " + (d.block ? "section" : "directive") +
                             " in configuration" + scope.where());
      }
    }
  }
  for (std::size_t m = 0; m < modules.size(); ++m) {
    for (std::size_t s = 0; s < modules[m]->confs().size(); ++s) {
      int spec = static_cast<int>(s);
      if (scope.conf(m, spec) == nullptr) continue;
      // An outer scope holds this spec too: it finishes this conf by merging
      // when it closes itself.
      if (scope.parent() != nullptr && scope.parent()->owner_of(m, spec) != nullptr) continue;
      Status st = finish_root(scope, m, spec);
      if (!st) return st;
    }
  }
  return Status::ok();
}

Status Loader::finish_root(ConfScope& scope, std::size_t module, int spec) const {
  const Module& m = *registry_.modules()[module];
  const ConfSpec& cs = m.confs()[static_cast<std::size_t>(spec)];
  void* conf = scope.conf(module, spec);
  for (const Directive& d : m.directives()) {
    if (d.body.spec == spec && d.body.apply_default && scope.find_set(d.name) == nullptr) {
      d.body.apply_default(conf);
    }
  }
  if (cs.init) {
    Status s = cs.init(ConfInit(env_, scope, module), conf);
    if (!s) return s;
  }
  for (const auto& child : scope.children()) {
    Status s = merge_down(conf, *child, module, spec);
    if (!s) return s;
  }
  return Status::ok();
}

Status Loader::merge_down(const void* parent_conf, ConfScope& scope, std::size_t module,
                          int spec) const {
  const Module& m = *registry_.modules()[module];
  const ConfSpec& cs = m.confs()[static_cast<std::size_t>(spec)];
  void* conf = scope.conf(module, spec);
  if (conf != nullptr) {
    for (const Directive& d : m.directives()) {
      if (d.body.spec == spec && d.body.inherit && scope.find_set(d.name) == nullptr) {
        d.body.inherit(parent_conf, conf);
      }
    }
    if (cs.merge) {
      Status s = cs.merge(ConfInit(env_, scope, module), parent_conf, conf);
      if (!s) return s;
    }
    parent_conf = conf;
  }
  for (const auto& child : scope.children()) {
    Status s = merge_down(parent_conf, *child, module, spec);
    if (!s) return s;
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Configuration>> Configuration::load(const ConfLoadOptions& options) {
  std::unique_ptr<Configuration> cfg(new Configuration());
  static const ModuleRegistry core_only{&core_module()};
  cfg->modules_ = options.modules != nullptr ? options.modules : &core_only;
  cfg->env_.prefix = options.prefix;
  cfg->env_.allow_include = options.allow_include;
  cfg->env_.default_error_log = options.error_log;
  cfg->env_.zones = cfg->zones_.get();
  cfg->env_.error_logs = cfg->error_logs_.get();
  cfg->env_.warnings = &cfg->warnings_;
  cfg->env_.modules = cfg->modules_;

  bool default_path = options.conf_path.empty();
  std::string path =
      join_conf_path(options.prefix, default_path ? kDefaultConfPath : options.conf_path);
  if (default_path && options.allow_embedded && !options.embedded_text.empty()) {
    struct stat st {};
    cfg->used_embedded_ = ::stat(path.c_str(), &st) != 0 && errno == ENOENT;
  }
  if (cfg->used_embedded_) {
    cfg->main_path_ = std::string(kEmbeddedName);
    cfg->env_.conf_prefix = join_conf_path(options.prefix, "conf/");
    cfg->env_.embedded_includes = options.embedded_includes;
  } else {
    cfg->main_path_ = path;
    cfg->env_.conf_prefix = directory_of(path);
  }

  cfg->main_ =
      std::make_unique<ConfScope>(kMainConf, nullptr, std::string(), std::vector<std::string>());
  Loader loader(*cfg->modules_, cfg->env_);
  loader.open_scope(*cfg->main_);
  ConfParser parser(options.limits);
  ScopeSink sink(loader, *cfg->main_);

  if (!options.extra_directives.empty()) {
    Status s = parser.parse_text(options.extra_directives, "command line", true, sink);
    if (!s) return s;
  }
  Status s = cfg->used_embedded_
                 ? parser.parse_text(options.embedded_text, cfg->main_path_, false, sink)
                 : parser.parse_file(path, sink);
  if (!s) return s;
  s = loader.close_scope(*cfg->main_);
  if (!s) return s;
  cfg->sources_ = parser.take_sources();
  return cfg;
}

const void* Configuration::find_conf(const Module& module, int spec,
                                     const std::type_info& type) const {
  std::size_t index = modules_->index_of(module);
  if (index == ModuleRegistry::npos || spec < 0 ||
      static_cast<std::size_t>(spec) >= module.confs().size() ||
      *module.confs()[static_cast<std::size_t>(spec)].type != type) {
    return nullptr;
  }
  std::deque<const ConfScope*> queue{main_.get()};
  while (!queue.empty()) {
    const ConfScope* scope = queue.front();
    queue.pop_front();
    if (const void* conf = scope->conf(index, spec)) return conf;
    for (const auto& child : scope->children()) queue.push_back(child.get());
  }
  return nullptr;
}

const void* Configuration::get_conf(const Module& module, int spec,
                                    const std::type_info& type) const {
  const void* conf = find_conf(module, spec, type);
  if (conf == nullptr) {
    std::fprintf(stderr, "vigil: no configuration of module \"%s\" (spec %d) of that type\n",
                 module.name().c_str(), spec);
    std::abort();
  }
  return conf;
}

std::string Configuration::dump() const {
  return dump_conf_sources(sources_);
}

std::string dump_conf_sources(const std::vector<ConfSource>& sources) {
  std::string out;
  for (const auto& src : sources) {
    out += "# configuration file " + src.path + ":\n";
    out += src.text;
    out += '\n';
  }
  return out;
}

}  // namespace vigil

namespace vigil {

const CoreConf& Configuration::core() const {
  return get<CoreConf>(core_module());
}

}  // namespace vigil
