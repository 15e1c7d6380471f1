// Tests of KeyLru (key_lru.h).
#include "cachenode/policy/key_lru.h"

#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

BlockKey K(uint64_t b) { return BlockKey{0, b}; }

TEST(KeyLruTest, DropsLeastRecentWhenFull) {
  KeyLru l(3);
  l.PushFront(K(1), 1);
  l.PushFront(K(2), 2);
  l.PushFront(K(3), 3);
  l.MoveToFront(l.Find(K(1)));  // order now 1, 3, 2 (head first)
  l.PushFront(K(4), 4);         // drops 2
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(l.Find(K(2)), kNoSlot);
  EXPECT_NE(l.Find(K(1)), kNoSlot);
  EXPECT_EQ(l.tag(l.Find(K(4))), 4);
  EXPECT_EQ(l.key(l.back()), K(3));
}

TEST(KeyLruTest, EraseAndReuseEntries) {
  KeyLru l(100);
  for (uint64_t i = 0; i < 100; ++i) l.PushFront(K(i), 0);
  for (uint64_t i = 0; i < 100; i += 2) l.Erase(l.Find(K(i)));
  EXPECT_EQ(l.size(), 50u);
  const size_t bytes = l.MemoryBytes();
  for (uint64_t i = 1000; i < 1050; ++i) l.PushFront(K(i), 7);
  EXPECT_EQ(l.size(), 100u);
  EXPECT_EQ(l.MemoryBytes(), bytes);  // erased entries were reused, nothing grew
  for (uint64_t i = 1; i < 100; i += 2) EXPECT_NE(l.Find(K(i)), kNoSlot);
  EXPECT_EQ(l.key(l.back()), K(1));
  l.PopBack();
  EXPECT_EQ(l.Find(K(1)), kNoSlot);
}

}  // namespace
}  // namespace ringcache::policy
