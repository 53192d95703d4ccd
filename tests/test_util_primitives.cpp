// The small primitives reproducibility and the readers rest on, against published reference values and hand-made
// bytes: util/random.h (splitmix64, FNV-1a, unbiased draws) and util/protobuf_wire.h.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>

#include "spread/util/protobuf_wire.h"
#include "spread/util/random.h"

TEST(Random, Splitmix64MatchesTheReferenceSequence) {
  // SplitMix64 seeded with 0 (Vigna's splitmix64.c): each output is the finalizer of state += golden ratio.
  EXPECT_EQ(spread::splitmix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(spread::splitmix64(0x9e3779b97f4a7c15ULL), 0x6e789e6aa1b965f4ULL);
}

TEST(Random, Fnv1a64MatchesTheReferenceVectors) {
  // The FNV authors' test vectors for 64-bit FNV-1a.
  EXPECT_EQ(spread::fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(spread::fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(spread::fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Random, DrawBelowIsUniformAndInRange) {
  std::mt19937_64 gen(7);
  EXPECT_EQ(spread::draw_below(gen, 1), 0u);
  std::array<int, 3> counts{};
  for (int i = 0; i < 30000; ++i) ++counts[spread::draw_below(gen, 3)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);  // 4.6 standard deviations
  // Near 2^64 the rejection matters: bound 2^63 + 1 rejects almost half of the raw draws, never returns >= bound.
  const uint64_t big = (1ULL << 63) + 1;
  for (int i = 0; i < 1000; ++i) EXPECT_LT(spread::draw_below(gen, big), big);
}

namespace {
std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(char(v));
  return out;
}
}  // namespace

TEST(ProtobufWire, ReadsEveryWireTypeAndNestedMessages) {
  // field 1 = varint 150 (the protobuf guide's example), field 2 = "hi" (length-delimited), field 3 = fixed32 1.5f,
  // field 4 = fixed64 (skipped), field 5 = a nested message {1: varint 1}.
  const std::string message = bytes({0x08, 0x96, 0x01, 0x12, 0x02, 'h', 'i', 0x1d, 0x00, 0x00, 0xc0, 0x3f,
                                     0x21, 1, 2, 3, 4, 5, 6, 7, 8, 0x2a, 0x02, 0x08, 0x01});
  spread::WireReader r(message);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 1u);
  EXPECT_EQ(r.wire_type(), 0);
  EXPECT_EQ(r.varint(), 150u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 2u);
  EXPECT_EQ(r.bytes(), "hi");
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 3u);
  EXPECT_EQ(r.fixed32_float(), 1.5f);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 4u);
  EXPECT_EQ(r.bytes().size(), 8u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 5u);
  spread::WireReader inner(r.bytes());
  ASSERT_TRUE(inner.next());
  EXPECT_EQ(inner.varint(), 1u);
  EXPECT_FALSE(inner.next());
  EXPECT_FALSE(r.next());
}

TEST(ProtobufWire, MalformedBytesThrowWithoutReadingPastTheEnd) {
  auto error_of = [](const std::string& message) -> std::string {
    try {
      for (spread::WireReader r(message); r.next();) {
      }
    } catch (const spread::ProtobufError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(error_of(bytes({0x12, 0x05, 'a'})), "truncated");           // a run longer than the message
  EXPECT_EQ(error_of(bytes({0x08, 0x96})), "truncated");                // a varint cut off
  EXPECT_EQ(error_of(bytes({0x1d, 0x00})), "truncated");                // fixed32 cut off
  EXPECT_EQ(error_of(std::string(11, char(0x80)) + '\x01'), "a varint longer than 10 bytes");
  EXPECT_EQ(error_of(bytes({0x0b})), "unknown wire type 3");            // start-group, never in proto3
  EXPECT_EQ(error_of(bytes({0x12, 0xff, 0xff, 0xff, 0xff, 0x0f})), "truncated");  // a 4 GiB length
}
