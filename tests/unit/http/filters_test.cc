// The header filters (http/core/filters.h) on a request whose head a
// handler has filled: the not-modified filter's preconditions and 304, and
// the range filter's 206 and 416, the add_header filter's choice of the
// location's list, without a socket.
#include <gtest/gtest.h>

#include <memory>

#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/filters/add_header.h"
#include "http/filters/range.h"

namespace vigil::http {
namespace {

class HeaderFilters : public ::testing::Test {
 protected:
  HeaderFilters() {
    // The module confs a loaded configuration binds (module.h); add_header's
    // and the range filter's are read by these filters.
    loc_.module_confs.assign(kMaxHttpModules, nullptr);
    loc_.module_confs[add_header_module().index()] = &add_header_;
    loc_.module_confs[range_module().index()] = &range_;
    r_.loc = &loc_;
    r_.line.method = Method::kGet;
    // What the static handler sets for a 1000-byte file.
    r_.headers_out.status = 200;
    r_.headers_out.content_length = 1000;
    r_.headers_out.etag = "\"5f-3e8\"";
    r_.headers_out.last_modified = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
    r_.headers_out.accept_ranges = true;
  }
  AddHeaderConf add_header_;
  RangeConf range_;
  HttpLocConf loc_;
  Request r_;
};

TEST_F(HeaderFilters, MatchingIfNoneMatchIsA304WithoutContent) {
  r_.if_none_match = "\"other\", W/\"5f-3e8\"";  // weak comparison
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 304);
  EXPECT_TRUE(r_.header_only);
  EXPECT_EQ(r_.headers_out.content_length, -1);
  EXPECT_FALSE(r_.headers_out.accept_ranges);
  EXPECT_EQ(r_.headers_out.etag, "\"5f-3e8\"");  // the validators stay
}

TEST_F(HeaderFilters, IfNoneMatchWinsOverIfModifiedSince) {
  r_.if_none_match = "\"other\"";
  r_.if_modified_since = "Sun, 06 Nov 1994 08:49:37 GMT";
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200);
}

TEST_F(HeaderFilters, IfModifiedSinceFollowsTheLocationsRule) {
  r_.if_modified_since = "Sun, 06 Nov 1994 08:49:38 GMT";  // a second later
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200) << "exact: only the same date";
  loc_.if_modified_since = IfModifiedSince::kBefore;
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 304);
}

TEST_F(HeaderFilters, FailedIfMatchOrIfUnmodifiedSinceIs412) {
  r_.if_match = "W/\"5f-3e8\"";  // strong comparison never matches a weak tag
  EXPECT_EQ(not_modified_header_filter(r_), 412);
  r_.if_match = {};
  r_.if_unmodified_since = "Sun, 06 Nov 1994 08:49:36 GMT";
  EXPECT_EQ(not_modified_header_filter(r_), 412);
  r_.if_unmodified_since = "Sun, 06 Nov 1994 08:49:37 GMT";
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200);
}

TEST_F(HeaderFilters, NotModifiedLeavesOtherStatusesAlone) {
  r_.headers_out.status = 404;
  r_.if_none_match = "*";
  EXPECT_EQ(not_modified_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 404);
}

TEST_F(HeaderFilters, OneRangeBecomesA206OfThoseBytes) {
  r_.range = "bytes=100-199";
  EXPECT_EQ(range_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 206);
  EXPECT_EQ(r_.headers_out.content_length, 100);
  EXPECT_EQ(r_.body_offset, 100);
  EXPECT_EQ(r_.headers_out.content_range, "bytes 100-199/1000");
  EXPECT_FALSE(r_.headers_out.accept_ranges);
}

TEST_F(HeaderFilters, UnsatisfiableRangeIs416WithTheSize) {
  r_.range = "bytes=1000-";
  EXPECT_EQ(range_header_filter(r_), 416);
  EXPECT_EQ(std::string_view(r_.content_range, r_.content_range_len), "bytes */1000");
}

TEST_F(HeaderFilters, RangeNeedsAMatchingIfRangeAGetAndAcceptRanges) {
  r_.range = "bytes=0-9";
  r_.if_range = "\"stale\"";
  EXPECT_EQ(range_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200);
  r_.if_range = "Sun, 06 Nov 1994 08:49:37 GMT";
  r_.line.method = Method::kHead;
  EXPECT_EQ(range_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200);
  r_.line.method = Method::kGet;
  r_.headers_out.accept_ranges = false;
  EXPECT_EQ(range_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 200);
  r_.headers_out.accept_ranges = true;
  EXPECT_EQ(range_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.status, 206);
}

TEST_F(HeaderFilters, AddHeaderFilterChoosesTheLocationsList) {
  EXPECT_EQ(add_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.add_headers, nullptr);
  auto list = std::make_shared<AddHeaderList>();
  add_header_.list = list;
  EXPECT_EQ(add_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.add_headers, list.get());
}

}  // namespace
}  // namespace vigil::http
