// StopText: stop strings honoured across piece boundaries, held-back text, UTF-8 tails.
#include <gtest/gtest.h>

#include "serve/stop_text.h"

namespace kiln::serve {
namespace {

TEST(StopText, HoldsBackAPossibleStopAcrossPieces) {
  StopText t({"END"});
  EXPECT_FALSE(t.append("hello E"));
  EXPECT_EQ(t.take(false), "hello ");  // "E" may begin "END"
  EXPECT_FALSE(t.append("N"));
  EXPECT_EQ(t.take(false), "");
  EXPECT_TRUE(t.append("D and more"));
  EXPECT_EQ(t.text(), "hello ");
  EXPECT_EQ(t.take(true), "");
}

TEST(StopText, ReleasesAFalseStartAndFlushes) {
  StopText t({"END", "xy"});
  EXPECT_FALSE(t.append("aEN"));
  EXPECT_EQ(t.take(false), "a");
  EXPECT_FALSE(t.append("x"));
  EXPECT_EQ(t.take(false), "EN");  // "ENx" cannot start a stop; "x" can
  EXPECT_EQ(t.take(true), "x");
}

TEST(StopText, EarliestStopWins) {
  StopText t({"cd", "b"});
  EXPECT_TRUE(t.append("abcd"));
  EXPECT_EQ(t.text(), "a");
}

TEST(StopText, HoldsIncompleteUtf8) {
  StopText t({});
  EXPECT_FALSE(t.append("a\xE2\x82"));
  EXPECT_EQ(t.take(false), "a");
  EXPECT_FALSE(t.append("\xAC"));
  EXPECT_EQ(t.take(false), "\xE2\x82\xAC");
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ok"), 0u);
}

}  // namespace
}  // namespace kiln::serve
