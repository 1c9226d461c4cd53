// ReadAll (common/file.h): a regular file is read into a string sized once from its length, and
// its end is found without growing the string; a pipe, whose length is unknown, is read whole;
// more than the limit is EFBIG.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/file.h"
#include "tests/integration/test_directory.h"

namespace hlocache {
namespace {

std::string FileBytes(size_t bytes) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return s;
}

class ReadAllTest : public testing::TestDirectory {
 protected:
  int OpenFileWith(const std::string& bytes) {
    const std::filesystem::path path = root_ / "f";
    std::ofstream(path, std::ios::binary) << bytes;
    return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
};

TEST_F(ReadAllTest, ARegularFileIsReadWholeWithoutGrowingTheString) {
  for (const size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{3} << 20}) {
    const std::string bytes = FileBytes(size);
    const int fd = OpenFileWith(bytes);
    ASSERT_GE(fd, 0);
    std::string out = "left over";
    EXPECT_EQ(ReadAll(fd, out, size_t{1} << 30), 0) << size;
    ::close(fd);
    EXPECT_EQ(out, bytes) << size;
    // Sized once for the file and its one spare byte: a regrowth to look for the end would add
    // a whole read piece (a megabyte) to the capacity and copy what was read. (An empty file
    // says nothing of its length: files under /proc read as empty ones do.)
    if (size > 0) {
      EXPECT_LT(out.capacity(), size + 4096) << size;
    }
  }
}

TEST_F(ReadAllTest, APipeIsReadWhole) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const std::string bytes = FileBytes((size_t{5} << 20) + 17);
  std::thread writer([&] {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::write(fds[1], bytes.data() + sent, bytes.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  std::string out;
  EXPECT_EQ(ReadAll(fds[0], out, size_t{1} << 30), 0);
  writer.join();
  ::close(fds[0]);
  EXPECT_EQ(out, bytes);
}

TEST_F(ReadAllTest, MoreThanTheLimitIsEfbig) {
  const int fd = OpenFileWith(FileBytes(10000));
  ASSERT_GE(fd, 0);
  std::string out;
  EXPECT_EQ(ReadAll(fd, out, 9999), EFBIG);
  ::close(fd);
  const int exact = OpenFileWith(FileBytes(10000));
  EXPECT_EQ(ReadAll(exact, out, 10000), 0);
  EXPECT_EQ(out.size(), 10000u);
  ::close(exact);
}

}  // namespace
}  // namespace hlocache
