#pragma once
// Drives the lexer over configuration sources (files, the embedded text, -g
// text) and hands every statement to a StatementSink. The sink decides what a
// statement means; the parser owns what is common to every sink: the file
// stack (include depth, include cycles), block nesting, and nginx's rules for
// where "}" and end of file may appear:
//   - a file (or the -g text) ends at end of text; "}" there is unexpected;
//   - a block ends at "}"; end of text there is "expecting "}"";
//   - so a block can never open in one file and close in another.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/lexer.h"
#include "vigil/core/result.h"

namespace vigil {

class ConfParser;

// A file (or text) read while loading, kept for `vigil -T`.
struct ConfSource {
  std::string path;  // as resolved ("conf/vigil.conf"), or "conf/vigil.conf (embedded)"
  std::string text;
};

class StatementSink {
 public:
  virtual ~StatementSink() = default;
  // Called for each statement that ends with ';' or '{' (words is never empty).
  // When it ends with '{' the sink must either consume the block by calling
  // parser.parse_block() or fail; returning ok without consuming it is a bug
  // the parser reports.
  virtual Status on_statement(ConfParser& parser, const ConfStatement& statement) = 0;
};

struct ConfParserLimits {
  int max_block_depth = 32;               // nested "{" across all files
  int max_include_depth = 16;             // files open at once, the main file included
  std::size_t max_file_size = 16u << 20;  // bytes; a configuration is text, not data
};

class ConfParser {
 public:
  explicit ConfParser(ConfParserLimits limits = {}) : limits_(limits) {}
  ConfParser(const ConfParser&) = delete;
  ConfParser& operator=(const ConfParser&) = delete;

  // Reads `path` and parses it at file level, delivering statements to `sink`.
  // Errors name `path` exactly as given (the caller resolves it first). `where`
  // (" in F:L" of an include directive) is appended to errors about opening
  // or reading the file itself, so they point at the include that asked.
  Status parse_file(const std::string& path, StatementSink& sink, std::string_view where = {});

  // Parses text that is not read from a file: the embedded configuration
  // (recorded as a source under `name`) or -g text (command_line: not recorded,
  // errors say "in command line", blocks are refused as nginx does).
  Status parse_text(std::string_view text, std::string name, bool command_line,
                    StatementSink& sink);

  // Parses the block a statement just opened, up to its "}". Only valid from
  // on_statement() for a statement that ended with '{'.
  Status parse_block(StatementSink& sink);

  // The source being parsed (for locations) and every source read so far.
  const ConfOrigin& origin() const { return frames_.back()->origin; }
  const std::vector<ConfSource>& sources() const { return sources_; }
  std::vector<ConfSource> take_sources() { return std::move(sources_); }
  int block_depth() const { return block_depth_; }

 private:
  struct Frame {
    ConfOrigin origin;
    std::string text;
    ConfLexer lexer{std::string_view(), nullptr};
    dev_t dev = 0;
    ino_t ino = 0;
    bool is_file = false;
    bool block_pending = false;  // a '{' was returned and not yet consumed
  };

  Status run(Frame& frame, StatementSink& sink, bool in_block);
  Status push_and_run(std::unique_ptr<Frame> frame, StatementSink& sink);
  Status read_file(const std::string& path, Frame* frame, std::string_view where);

  ConfParserLimits limits_;
  std::vector<std::unique_ptr<Frame>> frames_;
  std::vector<ConfSource> sources_;
  int block_depth_ = 0;
};

}  // namespace vigil
