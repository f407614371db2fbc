#pragma once
// Buffers and chains (nginx's ngx_buf_t / ngx_chain_t): a Buf is either a
// memory range [pos, last) or a file range [file_pos, file_last) of file_fd.
// Chains are singly linked and allocated from an arena; nothing here owns memory.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace vigil {

struct Buf {
  char* start = nullptr;  // the memory block
  char* end = nullptr;
  char* pos = nullptr;  // unread / unsent data
  char* last = nullptr;

  int file_fd = -1;  // for in_file buffers
  off_t file_pos = 0;
  off_t file_last = 0;

  bool in_file = false;
  bool flush = false;
  bool last_buf = false;  // the last buffer of a response

  std::size_t size() const {
    return in_file ? static_cast<std::size_t>(file_last - file_pos)
                   : static_cast<std::size_t>(last - pos);
  }
  bool empty() const { return size() == 0; }
  std::size_t free_space() const { return static_cast<std::size_t>(end - last); }
  void reset(char* mem, std::size_t n) {
    start = pos = last = mem;
    end = mem + n;
    in_file = flush = last_buf = false;
    file_fd = -1;
    file_pos = file_last = 0;
  }
};

struct Chain {
  Buf* buf = nullptr;
  Chain* next = nullptr;
};

}  // namespace vigil
