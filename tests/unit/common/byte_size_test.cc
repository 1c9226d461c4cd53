#include <gtest/gtest.h>

#include "common/byte_size.h"
#include "tests/unit/status_matchers.h"

namespace hlocache {
namespace {

TEST(ByteSizeTest, NumbersWithBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("1073741824"), 1073741824u);
  EXPECT_EQ(*ParseByteSize("512K"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("512M"), 512u << 20);
  EXPECT_EQ(*ParseByteSize("10G"), 10ull << 30);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("3tb"), 3ull << 40);
}

TEST(ByteSizeTest, RejectsWhatIsNotASize) {
  for (const char* bad :
       {"", "G", "-1", "1.5G", "10Q", "10 G", "99999999999999999999", "17000000T"}) {
    EXPECT_THAT(ParseByteSize(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
}

}  // namespace
}  // namespace hlocache
