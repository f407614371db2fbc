// Tests for src/http/tokens.cc: method and field names, lists.

#include "codec/tokens.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace vigil::http {
namespace {

TEST(Tokens, NamesAndLists) {
  EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(iequals("Content-Length", "Content-Lengt"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_EQ(header_id("TRANSFER-ENCODING"), HeaderId::kTransferEncoding);
  EXPECT_EQ(header_id("Transfer-Encodings"), HeaderId::kOther);
  EXPECT_EQ(method_from_token("OPTIONS"), Method::kOptions);
  EXPECT_EQ(method_from_token("options"), Method::kOther);
  EXPECT_EQ(method_name(Method::kPatch), "PATCH");
  EXPECT_EQ(method_name(Method::kOther), "");

  EXPECT_TRUE(list_has_token("keep-alive, Close", "close"));
  EXPECT_TRUE(list_has_token(",,close,,", "close"));
  EXPECT_FALSE(list_has_token("closed, x-close", "close"));
  EXPECT_FALSE(list_has_token("", "close"));

  ListReader r(" a , \"b,c\"\t,, d=\"e\\\",f\" ,");
  std::string_view e;
  std::vector<std::string> got;
  while (r.next(e)) got.emplace_back(e);
  EXPECT_EQ(got, (std::vector<std::string>{"a", "\"b,c\"", "d=\"e\\\",f\""}));
}

}  // namespace
}  // namespace vigil::http
