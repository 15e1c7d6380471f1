// The coordinator's membership decision, rule by rule (member_decision.h).
#include "coordinator/member_decision.h"

#include "gtest/gtest.h"

namespace ringcache::coordinator {
namespace {

MemberVerdict::Kind Decide(MemberFacts f) { return DecideMember(f).kind; }

TEST(MemberDecisionTest, EveryRule) {
  MemberFacts f;
  f.id = 2;
  f.in_ring = true;
  EXPECT_EQ(Decide(f), MemberVerdict::kRemove) << "in the ring, lease gone";
  EXPECT_NE(DecideMember(f).why.find("registration gone"), std::string::npos);
  f.lease = 7;
  EXPECT_EQ(Decide(f), MemberVerdict::kAskHealth) << "first sight: ask first";
  f.quarantined = false;
  EXPECT_EQ(Decide(f), MemberVerdict::kAccept);
  f.quarantined = true;
  EXPECT_EQ(Decide(f), MemberVerdict::kRemove) << "it lost its objects while nobody watched";
  f.accepted = 7;
  EXPECT_EQ(Decide(f), MemberVerdict::kNothing) << "accepted under this lease";
  f.lease = 9;
  EXPECT_EQ(Decide(f), MemberVerdict::kRemove) << "registered again under another lease";
  EXPECT_NE(DecideMember(f).why.find("new lease"), std::string::npos);
  f.in_ring = false;
  EXPECT_EQ(Decide(f), MemberVerdict::kJoin) << "out and registered: it rejoins";
  f.drained = true;
  EXPECT_EQ(Decide(f), MemberVerdict::kStayOut);
  f.drained = false;
  f.address_moved = true;
  EXPECT_EQ(Decide(f), MemberVerdict::kStayOut);
  f.lease = 0;
  EXPECT_EQ(Decide(f), MemberVerdict::kNothing) << "out and not registered";
}

}  // namespace
}  // namespace ringcache::coordinator
