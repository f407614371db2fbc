#include "http/core/types.h"

#include <algorithm>

namespace vigil::http {
namespace {

char lower(char ch) {
  return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
}

// a < b, with `b` compared lower-cased (entries are stored lower case).
bool less_folded(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char x = a[i];
    const char y = lower(b[i]);
    if (x != y) return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
  }
  return a.size() < b.size();
}

bool equal_folded(std::string_view stored, std::string_view ext) {
  if (stored.size() != ext.size()) return false;
  for (std::size_t i = 0; i < ext.size(); ++i) {
    if (stored[i] != lower(ext[i])) return false;
  }
  return true;
}

TypesMap make_builtin() {
  TypesMap m;
  static constexpr std::pair<const char*, const char*> kTypes[] = {
      {"html", "text/html"},
      {"htm", "text/html"},
      {"shtml", "text/html"},
      {"css", "text/css"},
      {"xml", "text/xml"},
      {"txt", "text/plain"},
      {"js", "application/javascript"},
      {"mjs", "application/javascript"},
      {"json", "application/json"},
      {"gif", "image/gif"},
      {"jpeg", "image/jpeg"},
      {"jpg", "image/jpeg"},
      {"png", "image/png"},
      {"svg", "image/svg+xml"},
      {"svgz", "image/svg+xml"},
      {"webp", "image/webp"},
      {"ico", "image/x-icon"},
      {"avif", "image/avif"},
      {"woff", "font/woff"},
      {"woff2", "font/woff2"},
      {"pdf", "application/pdf"},
      {"zip", "application/zip"},
      {"gz", "application/gzip"},
      {"wasm", "application/wasm"},
      {"mp4", "video/mp4"},
      {"webm", "video/webm"},
      {"mp3", "audio/mpeg"},
      {"ogg", "audio/ogg"},
      {"bin", "application/octet-stream"},
  };
  for (const auto& [ext, type] : kTypes) m.add(ext, type);
  m.finish();
  return m;
}

}  // namespace

void TypesMap::add(std::string_view extension, std::string_view type) {
  std::string ext(extension);
  for (char& ch : ext) ch = lower(ch);
  for (auto& e : entries_) {
    if (e.first == ext) {
      e.second = std::string(type);
      return;
    }
  }
  entries_.emplace_back(std::move(ext), std::string(type));
}

void TypesMap::finish() {
  std::sort(entries_.begin(), entries_.end());
}

std::string_view TypesMap::find(std::string_view extension) const {
  if (extension.empty()) return {};
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), extension,
      [](const auto& e, std::string_view ext) { return less_folded(e.first, ext); });
  if (it != entries_.end() && equal_folded(it->first, extension)) return it->second;
  return {};
}

const TypesMap& TypesMap::builtin() {
  static const TypesMap map = make_builtin();
  return map;
}

}  // namespace vigil::http
