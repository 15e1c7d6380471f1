// Tests of SlotTable, SlotList and KeyIndex (slot_table.h, key_index.h).
#include "cachenode/policy/slot_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

template <typename L>
std::vector<SlotId> Walk(const SlotList& l, const L& links) {
  std::vector<SlotId> v;
  for (SlotId s = l.head; s != kNoSlot; s = links.next(s)) v.push_back(s);
  return v;
}

TEST(SlotTableTest, AllocatesInOrderFindsAndFrees) {
  SlotTable t(3);
  EXPECT_EQ(t.capacity(), 3u);
  const SlotId a = t.Allocate(BlockKey{1, 10}, false);
  const SlotId b = t.Allocate(BlockKey{2, 10}, true);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(t.used(), 2u);
  EXPECT_EQ(t.Find(BlockKey{1, 10}), a);
  EXPECT_EQ(t.Find(BlockKey{2, 10}), b);
  EXPECT_EQ(t.Find(BlockKey{1, 11}), kNoSlot);
  EXPECT_FALSE(t.dirty(a));
  EXPECT_TRUE(t.dirty(b));
  t.Allocate(BlockKey{3, 0}, false);
  EXPECT_TRUE(t.full());
  t.Free(a);
  EXPECT_EQ(t.Find(BlockKey{1, 10}), kNoSlot);
  EXPECT_EQ(t.used(), 2u);
  // The freed slot is reused.
  EXPECT_EQ(t.Allocate(BlockKey{9, 9}, false), a);
  EXPECT_EQ(t.key(a), (BlockKey{9, 9}));
}

TEST(SlotTableTest, DirtyAndAuxBitsAreIndependent) {
  SlotTable t(1);
  const SlotId s = t.Allocate(BlockKey{0, 0}, true);
  t.set_aux(s, 0x55);
  EXPECT_TRUE(t.dirty(s));
  EXPECT_EQ(t.aux(s), 0x55);
  t.set_dirty(s, false);
  EXPECT_EQ(t.aux(s), 0x55);
  EXPECT_FALSE(t.dirty(s));
  t.set_aux(s, 0x7f);
  t.set_dirty(s, true);
  EXPECT_EQ(t.aux(s), 0x7f);
}

TEST(SlotListTest, PushUnlinkMove) {
  SlotTable t(4);
  SlotList l;
  for (int i = 0; i < 4; ++i) l.PushFront(t.links(), t.Allocate(BlockKey{0, uint64_t(i)}, false));
  EXPECT_EQ(Walk(l, t.links()), (std::vector<SlotId>{3, 2, 1, 0}));
  EXPECT_EQ(l.tail, 0u);
  l.MoveToFront(t.links(), 0);
  EXPECT_EQ(Walk(l, t.links()), (std::vector<SlotId>{0, 3, 2, 1}));
  l.Unlink(t.links(), 2);
  EXPECT_EQ(Walk(l, t.links()), (std::vector<SlotId>{0, 3, 1}));
  l.Unlink(t.links(), 1);
  EXPECT_EQ(l.tail, 3u);
  l.Unlink(t.links(), 0);
  l.Unlink(t.links(), 3);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.head, kNoSlot);
  EXPECT_EQ(l.tail, kNoSlot);
}

TEST(KeyIndexTest, ManyKeysSurviveRehash) {
  SlotTable t(10000);
  for (uint64_t i = 0; i < 10000; ++i) t.Allocate(BlockKey{uint32_t(i % 7), i}, false);
  for (uint64_t i = 0; i < 10000; ++i) {
    ASSERT_EQ(t.Find(BlockKey{uint32_t(i % 7), i}), static_cast<SlotId>(i));
    ASSERT_EQ(t.Find(BlockKey{uint32_t(i % 7) + 1, i}), kNoSlot);
  }
}

TEST(SlotTableTest, MetadataIsSmallPerBlock) {
  SlotTable t(1 << 20);
  // 24-byte record + index (4 + 1 bytes per bucket, fewer than 2.3 buckets per slot).
  EXPECT_LE(t.MetadataBytes() / t.capacity(), 36u);
}

}  // namespace
}  // namespace ringcache::policy
