#include "core/conf/parser.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vigil {

namespace {

// nginx's wording for a failed system call on a file, errno text included.
Status file_error(const char* call, const std::string& path, int err, std::string_view where) {
  return Status::error(std::string(call) + " \"" + path + "\" failed (" + std::to_string(err) +
                       ": " + std::strerror(err) + ")" + std::string(where));
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

Status ConfParser::read_file(const std::string& path, Frame* frame, std::string_view where) {
  // O_NONBLOCK: opening a FIFO by mistake must not hang the load.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return file_error("open()", path, errno, where);
  FdCloser closer(fd);

  struct stat st {};
  if (::fstat(fd, &st) != 0) return file_error("fstat()", path, errno, where);
  if (S_ISDIR(st.st_mode)) return file_error("read()", path, EISDIR, where);
  if (!S_ISREG(st.st_mode)) {
    return Status::error("\"" + path + "\" is not a regular file" + std::string(where));
  }

  for (const auto& open_frame : frames_) {
    if (open_frame->is_file && open_frame->dev == st.st_dev && open_frame->ino == st.st_ino) {
      return Status::error("include cycle: \"" + path + "\" is already being parsed" +
                           std::string(where));
    }
  }

  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return file_error("read()", path, errno, where);
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > limits_.max_file_size) {
      return Status::error("configuration file \"" + path + "\" is too large (more than " +
                           std::to_string(limits_.max_file_size) + " bytes)" + std::string(where));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }

  frame->origin.name = path;
  frame->text = std::move(text);
  frame->dev = st.st_dev;
  frame->ino = st.st_ino;
  frame->is_file = true;
  return Status::ok();
}

Status ConfParser::parse_file(const std::string& path, StatementSink& sink,
                              std::string_view where) {
  if (static_cast<int>(frames_.size()) >= limits_.max_include_depth) {
    return Status::error("includes nested too deeply (more than " +
                         std::to_string(limits_.max_include_depth) + " files)" +
                         std::string(where));
  }
  auto frame = std::make_unique<Frame>();
  Status s = read_file(path, frame.get(), where);
  if (!s) return s;
  bool seen = false;
  for (const auto& src : sources_) seen = seen || src.path == path;
  if (!seen) sources_.push_back({path, frame->text});
  return push_and_run(std::move(frame), sink);
}

Status ConfParser::parse_text(std::string_view text, std::string name, bool command_line,
                              StatementSink& sink) {
  auto frame = std::make_unique<Frame>();
  frame->origin.name = std::move(name);
  frame->origin.command_line = command_line;
  frame->text = std::string(text);
  if (!command_line) sources_.push_back({frame->origin.name, frame->text});
  return push_and_run(std::move(frame), sink);
}

Status ConfParser::push_and_run(std::unique_ptr<Frame> frame, StatementSink& sink) {
  frame->lexer = ConfLexer(frame->text, &frame->origin);
  frames_.push_back(std::move(frame));
  Status s = run(*frames_.back(), sink, false);
  frames_.pop_back();
  return s;
}

Status ConfParser::parse_block(StatementSink& sink) {
  if (frames_.empty() || !frames_.back()->block_pending) {
    return Status::error("internal error: parse_block() called with no block open");
  }
  Frame& frame = *frames_.back();
  frame.block_pending = false;
  if (block_depth_ >= limits_.max_block_depth) {
    return Status::error("blocks nested too deeply (more than " +
                         std::to_string(limits_.max_block_depth) + " levels)" +
                         frame.origin.where(frame.lexer.line()));
  }
  ++block_depth_;
  Status s = run(frame, sink, true);
  --block_depth_;
  return s;
}

Status ConfParser::run(Frame& frame, StatementSink& sink, bool in_block) {
  ConfStatement st;
  for (;;) {
    Status s = frame.lexer.next(&st);
    if (!s) return s;
    switch (st.end) {
      case ConfTerminator::kEnd:
        if (in_block) {
          return Status::error("unexpected end of file, expecting \"}\"" +
                               frame.origin.where(st.line));
        }
        return Status::ok();
      case ConfTerminator::kBlockEnd:
        if (!in_block) return Status::error("unexpected \"}\"" + frame.origin.where(st.line));
        return Status::ok();
      case ConfTerminator::kBlockStart:
        if (frame.origin.command_line) {
          return Status::error("block directives are not supported in -g option" +
                               frame.origin.where(st.line));
        }
        frame.block_pending = true;
        s = sink.on_statement(*this, st);
        if (!s) return s;
        if (frame.block_pending) {
          return Status::error("internal error: the block of \"" + st.words[0].text +
                               "\" was not parsed" + frame.origin.where(st.line));
        }
        break;
      case ConfTerminator::kSemicolon:
        s = sink.on_statement(*this, st);
        if (!s) return s;
        break;
    }
  }
}

}  // namespace vigil
