#include "core/conf/tree.h"

namespace vigil {

namespace {

class TreeBuilder : public StatementSink {
 public:
  explicit TreeBuilder(std::vector<ConfNode>* out) : out_(out) {}

  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    ConfNode node;
    node.line = st.words[0].line;
    node.words.reserve(st.words.size());
    for (const auto& w : st.words) node.words.push_back(w.text);
    node.block = st.end == ConfTerminator::kBlockStart;
    if (node.block) {
      TreeBuilder child(&node.children);
      Status s = parser.parse_block(child);
      if (!s) return s;
    }
    out_->push_back(std::move(node));
    return Status::ok();
  }

 private:
  std::vector<ConfNode>* out_;
};

}  // namespace

Result<std::vector<ConfNode>> parse_conf_tree(std::string_view text, std::string name,
                                              ConfParserLimits limits) {
  std::vector<ConfNode> nodes;
  ConfParser parser(limits);
  TreeBuilder builder(&nodes);
  Status s = parser.parse_text(text, std::move(name), false, builder);
  if (!s) return s;
  return nodes;
}

}  // namespace vigil
