#include "compiler/hlo/text_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace hlocache::hlo {
namespace {

TEST(TextWriterTest, PiecesOfEveryLengthArriveWholeAndInOrder) {
  // Lengths on both sides of each copy path (3 bytes, 4-7, 8-16, longer): a path that dropped
  // or moved a byte, or wrote past a piece's end, shows as a mismatch with std::string's append.
  std::string written = "head:";
  std::string expected = written;
  {
    TextWriter w(written);
    for (size_t length = 0; length <= 40; ++length) {
      std::string piece;
      for (size_t k = 0; k < length; ++k) piece += static_cast<char>('a' + (length + k) % 26);
      w.Reserve(length + 1);
      w.Put(std::string_view(piece));
      w.Put('|');
      expected += piece;
      expected += '|';
    }
  }  // The destructor cuts the string to what was written.
  EXPECT_EQ(written, expected);
}

TEST(TextWriterTest, GrowingKeepsWhatWasWrittenAndFinishCutsToIt) {
  std::string written;
  TextWriter w(written);
  std::string expected;
  for (int32_t i = 0; i < 5000; ++i) {
    w.Reserve(16);  // Small rooms: the string grows many times under the writer.
    w.Put("  ");
    w.PutNumbered('i', i);
    w.Put(" =\n");
    expected += "  i" + std::to_string(i) + " =\n";
  }
  w.Finish();
  EXPECT_EQ(written, expected);
  // Writing goes on after a Finish.
  w.Reserve(4);
  w.Put("end");
  w.Finish();
  EXPECT_EQ(written, expected + "end");
}

TEST(TextWriterTest, AStringManyWritersOpenInTurnMovesOnlyWhenFull) {
  std::string arena;
  arena.reserve(4096);
  const char* const block = arena.data();
  const size_t capacity = arena.capacity();
  std::string expected;
  // Writers opened and closed in turn, as the canonicalizer's are on its arena, fill it to the
  // last byte of its capacity without moving it.
  while (arena.size() + 8 <= capacity) {
    TextWriter w(arena);
    w.Reserve(8);
    w.Put("abcdefgh");
    expected += "abcdefgh";
  }
  EXPECT_EQ(arena.data(), block);
  EXPECT_EQ(arena.capacity(), capacity);
  // Past it, the string grows to at least twice its capacity at once.
  {
    TextWriter w(arena);
    w.Reserve(16);
    w.Put("0123456789abcdef");
    expected += "0123456789abcdef";
  }
  EXPECT_GE(arena.capacity(), 2 * capacity);
  EXPECT_EQ(arena, expected);
}

TEST(TextWriterTest, ATextStreamedThroughASmallBufferArrivesWholeAndInOrder) {
  std::string buffer = "head:";
  std::string streamed;
  std::string expected = "head:";
  TextWriter w(buffer);
  for (int32_t i = 0; i < 3000; ++i) {
    w.Reserve(16);
    w.PutNumbered('i', i);
    w.Put(", ");
    expected += "i" + std::to_string(i) + ", ";
    if (w.written() >= 256) {
      streamed += w.Written();
      w.Rewind();
    }
  }
  streamed += w.Written();
  EXPECT_EQ(streamed, expected);
  EXPECT_LT(buffer.capacity(), size_t{1024});  // It stayed small.
}

TEST(TextWriterTest, NumbersAtTheirWidestFitTheBytesTheContractNames) {
  std::string written;
  TextWriter w(written);
  w.Reserve(11);
  w.PutNumbered('c', std::numeric_limits<int32_t>::max());
  w.Reserve(20);
  w.PutDecimal(std::numeric_limits<int64_t>::max());
  w.Reserve(1);
  w.PutDecimal(0);
  w.Finish();
  EXPECT_EQ(written,
            "c2147483647"
            "9223372036854775807"
            "0");
}

}  // namespace
}  // namespace hlocache::hlo
