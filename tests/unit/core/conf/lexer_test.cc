// Tests src/core/conf/lexer.cc and parser.cc through the grammar-only tree
// (tree.cc): tokens, quoting, escapes, comments, blocks, lines, and every
// syntax error with its exact message.

#include "core/conf/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/conf/parser.h"
#include "core/conf/tree.h"

namespace vigil {
namespace {

using Words = std::vector<std::string>;

std::vector<ConfNode> parse_ok(std::string_view text) {
  auto r = parse_conf_tree(text, "t.conf");
  EXPECT_TRUE(r) << r.status().message();
  return r ? r.value() : std::vector<ConfNode>{};
}

std::string parse_error(std::string_view text, ConfParserLimits limits = {}) {
  auto r = parse_conf_tree(text, "t.conf", limits);
  return r ? std::string("(parsed)") : r.status().message();
}

// The words of the single statement in `text`.
Words words_of(std::string_view text) {
  auto nodes = parse_ok(text);
  EXPECT_EQ(nodes.size(), 1u) << text;
  return nodes.empty() ? Words{} : nodes[0].words;
}

TEST(ConfGrammar, EmptyAndCommentsOnly) {
  EXPECT_TRUE(parse_ok("").empty());
  EXPECT_TRUE(parse_ok("   \n\t\r\n").empty());
  EXPECT_TRUE(parse_ok("# just a comment\n  # another; { }\n").empty());
  EXPECT_TRUE(parse_ok("# comment without newline at end").empty());
}

TEST(ConfGrammar, DirectivesAndLines) {
  auto nodes = parse_ok("a 1;\nb  2\t3 ;\n\n  c;\r\nd\n 4\n;");
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].words, (Words{"a", "1"}));
  EXPECT_EQ(nodes[0].line, 1u);
  EXPECT_EQ(nodes[1].words, (Words{"b", "2", "3"}));
  EXPECT_EQ(nodes[1].line, 2u);
  EXPECT_EQ(nodes[2].words, (Words{"c"}));
  EXPECT_EQ(nodes[2].line, 4u);
  EXPECT_EQ(nodes[3].words, (Words{"d", "4"}));
  EXPECT_EQ(nodes[3].line, 5u);  // the line of the name, even when args continue below
  for (const auto& n : nodes) EXPECT_FALSE(n.block);
}

TEST(ConfGrammar, SemicolonAndBraceEndWords) {
  EXPECT_EQ(words_of("a b;"), (Words{"a", "b"}));
  auto nodes = parse_ok("a b{c d;}");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_TRUE(nodes[0].block);
  EXPECT_EQ(nodes[0].words, (Words{"a", "b"}));
  ASSERT_EQ(nodes[0].children.size(), 1u);
  EXPECT_EQ(nodes[0].children[0].words, (Words{"c", "d"}));
}

TEST(ConfGrammar, NestedBlocks) {
  auto nodes = parse_ok(
      "events {\n"
      "  worker_connections 10;\n"
      "  x {\n"
      "    y z;\n"
      "    w { }\n"
      "  }\n"
      "}\n"
      "after;\n");
  ASSERT_EQ(nodes.size(), 2u);
  const auto& ev = nodes[0];
  EXPECT_TRUE(ev.block);
  EXPECT_EQ(ev.line, 1u);
  ASSERT_EQ(ev.children.size(), 2u);
  EXPECT_EQ(ev.children[0].words, (Words{"worker_connections", "10"}));
  EXPECT_EQ(ev.children[0].line, 2u);
  const auto& x = ev.children[1];
  EXPECT_TRUE(x.block);
  EXPECT_EQ(x.line, 3u);
  ASSERT_EQ(x.children.size(), 2u);
  EXPECT_EQ(x.children[0].words, (Words{"y", "z"}));
  EXPECT_EQ(x.children[0].line, 4u);
  EXPECT_TRUE(x.children[1].block);
  EXPECT_TRUE(x.children[1].children.empty());
  EXPECT_EQ(nodes[1].words, (Words{"after"}));
  EXPECT_EQ(nodes[1].line, 8u);
}

TEST(ConfGrammar, Comments) {
  auto nodes = parse_ok("a 1; # trailing ; { }\n# whole line\nb 2;#x\nc a#b;\nd \"#q\";");
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].words, (Words{"a", "1"}));
  EXPECT_EQ(nodes[1].words, (Words{"b", "2"}));
  EXPECT_EQ(nodes[1].line, 3u);
  EXPECT_EQ(nodes[2].words, (Words{"c", "a#b"}));  // '#' inside a word is text
  EXPECT_EQ(nodes[3].words, (Words{"d", "#q"}));
  // A comment between arguments.
  EXPECT_EQ(words_of("a # note\n b;"), (Words{"a", "b"}));
}

TEST(ConfGrammar, DoubleAndSingleQuotes) {
  EXPECT_EQ(words_of("a \"b c\" 'd e';"), (Words{"a", "b c", "d e"}));
  EXPECT_EQ(words_of("a \"\" '';"), (Words{"a", "", ""}));
  EXPECT_EQ(words_of("a \"x;y{z}#w\";"), (Words{"a", "x;y{z}#w"}));
  EXPECT_EQ(words_of("a \"it's\" 'say \"hi\"';"), (Words{"a", "it's", "say \"hi\""}));
  EXPECT_EQ(words_of("\"quoted name\" v;"), (Words{"quoted name", "v"}));
  // A quoted word may end right at ';' or '{'.
  EXPECT_EQ(words_of("a \"b\";"), (Words{"a", "b"}));
  auto nodes = parse_ok("a 'b'{ }");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_TRUE(nodes[0].block);
}

TEST(ConfGrammar, QuotedWordSpansLines) {
  auto nodes = parse_ok("a \"line1\nline2\";\nb;");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].words, (Words{"a", "line1\nline2"}));
  EXPECT_EQ(nodes[1].line, 3u);
}

TEST(ConfGrammar, Escapes) {
  EXPECT_EQ(words_of(R"(a "q\"q";)"), (Words{"a", "q\"q"}));
  EXPECT_EQ(words_of(R"(a 's\'s';)"), (Words{"a", "s's"}));
  EXPECT_EQ(words_of(R"(a "b\\s";)"), (Words{"a", "b\\s"}));
  EXPECT_EQ(words_of(R"(a "x\ny\tz\rw";)"), (Words{"a", "x\ny\tz\rw"}));
  // Other backslashes stay, as in nginx (regexes need them).
  EXPECT_EQ(words_of(R"(a "\d+\.\w";)"), (Words{"a", "\\d+\\.\\w"}));
  // Outside quotes: the escaped character never ends the word.
  EXPECT_EQ(words_of(R"(a b\ c;)"), (Words{"a", "b\\ c"}));
  EXPECT_EQ(words_of(R"(a b\;c;)"), (Words{"a", "b\\;c"}));
  EXPECT_EQ(words_of(R"(a \"b\";)"), (Words{"a", "\"b\""}));
  EXPECT_EQ(words_of(R"(a x\\;)"), (Words{"a", "x\\"}));
}

TEST(ConfGrammar, VariablesAreLiteral) {
  EXPECT_EQ(words_of("set $a ${b}c;"), (Words{"set", "$a", "${b}c"}));
  EXPECT_EQ(words_of("x \"${host}:$port\";"), (Words{"x", "${host}:$port"}));
  // "${" does not open a block, but a later '{' does.
  auto nodes = parse_ok("if ${x} { y; }");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].words, (Words{"if", "${x}"}));
  EXPECT_TRUE(nodes[0].block);
}

TEST(ConfGrammar, CloseBraceInsideWordIsText) {
  EXPECT_EQ(words_of("a b}c;"), (Words{"a", "b}c"}));
}

TEST(ConfGrammar, ParenthesisMayFollowQuote) {
  // nginx lets ')' follow a quoted word, for if ($x = "y") conditions.
  EXPECT_EQ(words_of("if ($x = \"y\") ;"), (Words{"if", "($x", "=", "y", ")"}));
}

TEST(ConfGrammar, OddBytesAreWordText) {
  constexpr char kRaw[] = "a b\0c \xff\xfe;";
  std::string text(kRaw, sizeof(kRaw) - 1);
  auto w = words_of(text);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[1], std::string("b\0c", 3));
  EXPECT_EQ(w[2], "\xff\xfe");
}

TEST(ConfGrammarErrors, UnexpectedTokens) {
  EXPECT_EQ(parse_error(";"), "unexpected \";\" in t.conf:1");
  EXPECT_EQ(parse_error("a;\n  ;"), "unexpected \";\" in t.conf:2");
  EXPECT_EQ(parse_error("{ }"), "unexpected \"{\" in t.conf:1");
  EXPECT_EQ(parse_error("a;\n\n{"), "unexpected \"{\" in t.conf:3");
  EXPECT_EQ(parse_error("a b }"), "unexpected \"}\" in t.conf:1");
  EXPECT_EQ(parse_error("a;\n}"), "unexpected \"}\" in t.conf:2");
  EXPECT_EQ(parse_error("a { }\n}\n"), "unexpected \"}\" in t.conf:2");
  EXPECT_EQ(parse_error("a \"b\"c;"), "unexpected \"c\" in t.conf:1");
  EXPECT_EQ(parse_error("a\n'b'\"c\";"), "unexpected \"\"\" in t.conf:2");
}

TEST(ConfGrammarErrors, UnexpectedEnd) {
  EXPECT_EQ(parse_error("a"), "unexpected end of file, expecting \";\" or \"}\" in t.conf:1");
  EXPECT_EQ(parse_error("a b\n"), "unexpected end of file, expecting \";\" or \"}\" in t.conf:2");
  EXPECT_EQ(parse_error("a {\n b;\n"), "unexpected end of file, expecting \"}\" in t.conf:3");
  EXPECT_EQ(parse_error("a { b { }"), "unexpected end of file, expecting \"}\" in t.conf:1");
  EXPECT_EQ(parse_error("a \\"), "unexpected end of file, expecting \";\" or \"}\" in t.conf:1");
}

TEST(ConfGrammarErrors, UnterminatedQuote) {
  // Reported at the line the quote opened, which is where the mistake is.
  EXPECT_EQ(parse_error("a;\nb \"open\n\nmore;"), "unterminated double quoted string in t.conf:2");
  EXPECT_EQ(parse_error("b 'x;"), "unterminated single quoted string in t.conf:1");
  EXPECT_EQ(parse_error("b \"x\\\";"), "unterminated double quoted string in t.conf:1");
}

TEST(ConfGrammarErrors, NestingDepthIsLimited) {
  ConfParserLimits limits;
  limits.max_block_depth = 8;
  std::string ok, deep;
  for (int i = 0; i < 8; ++i) ok += "a {";
  for (int i = 0; i < 8; ++i) ok += "}";
  EXPECT_EQ(parse_error(ok, limits), "(parsed)");
  for (int i = 0; i < 9; ++i) deep += "a {\n";
  EXPECT_EQ(parse_error(deep, limits), "blocks nested too deeply (more than 8 levels) in t.conf:9");
  // The default limit holds against a hostile input without exhausting the stack.
  std::string hostile(200000, '{');
  for (std::size_t i = 0; i < hostile.size(); i += 2) hostile[i] = 'a';
  EXPECT_EQ(parse_error(hostile), "blocks nested too deeply (more than 32 levels) in t.conf:1");
}

// -g text goes through the same lexer with nginx's command-line wording.
class CollectSink : public StatementSink {
 public:
  Status on_statement(ConfParser&, const ConfStatement& st) override {
    names.push_back(st.words[0].text);
    return Status::ok();
  }
  std::vector<std::string> names;
};

TEST(ConfGrammarErrors, CommandLineText) {
  {
    ConfParser p;
    CollectSink sink;
    EXPECT_TRUE(p.parse_text("daemon off; master_process on;", "command line", true, sink));
    EXPECT_EQ(sink.names, (Words{"daemon", "master_process"}));
    EXPECT_TRUE(p.sources().empty());  // -g text is not a file
  }
  {
    ConfParser p;
    CollectSink sink;
    Status s = p.parse_text("daemon off", "command line", true, sink);
    EXPECT_EQ(s.message(), "unexpected end of parameter, expecting \";\" in command line");
  }
  {
    ConfParser p;
    CollectSink sink;
    Status s = p.parse_text("events { }", "command line", true, sink);
    EXPECT_EQ(s.message(), "block directives are not supported in -g option in command line");
  }
}

TEST(ConfParser, UnconsumedBlockIsReported) {
  ConfParser p;
  CollectSink sink;  // never calls parse_block
  Status s = p.parse_text("a { b; }", "t.conf", false, sink);
  EXPECT_EQ(s.message(), "internal error: the block of \"a\" was not parsed in t.conf:1");
}

TEST(ConfLexer, StatementsOneByOne) {
  ConfOrigin origin{"x.conf", false};
  ConfLexer lexer("a b;\nc {\n}\n", &origin);
  ConfStatement st;
  ASSERT_TRUE(lexer.next(&st));
  EXPECT_EQ(st.end, ConfTerminator::kSemicolon);
  ASSERT_EQ(st.words.size(), 2u);
  EXPECT_EQ(st.words[1].text, "b");
  ASSERT_TRUE(lexer.next(&st));
  EXPECT_EQ(st.end, ConfTerminator::kBlockStart);
  EXPECT_EQ(st.line, 2u);
  ASSERT_TRUE(lexer.next(&st));
  EXPECT_EQ(st.end, ConfTerminator::kBlockEnd);
  EXPECT_TRUE(st.words.empty());
  EXPECT_EQ(st.line, 3u);
  ASSERT_TRUE(lexer.next(&st));
  EXPECT_EQ(st.end, ConfTerminator::kEnd);
  ASSERT_TRUE(lexer.next(&st));  // stays at the end
  EXPECT_EQ(st.end, ConfTerminator::kEnd);
}

}  // namespace
}  // namespace vigil
