#pragma once
// The grammar alone: configuration text as a tree of statements, with no
// directive registry and no file access ("include" is just a statement here).
// The loader never builds this tree (it dispatches while parsing, as nginx
// does, so errors come in file order); tests and the fuzz target use it to
// check the grammar on its own.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/parser.h"
#include "vigil/core/result.h"

namespace vigil {

struct ConfNode {
  std::vector<std::string> words;  // words[0] is the directive name
  std::uint32_t line = 0;          // line of the name
  bool block = false;              // "name args { ... }"
  std::vector<ConfNode> children;  // the block's statements
};

// Parses `text` as a file named `name`.
Result<std::vector<ConfNode>> parse_conf_tree(std::string_view text, std::string name,
                                              ConfParserLimits limits = {});

}  // namespace vigil
