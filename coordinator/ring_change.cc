// The pure transition core of a cache ring change (ring_change.h).
#include "coordinator/ring_change.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace ringcache::coordinator {
namespace {

bool Contains(const std::vector<uint32_t>& v, uint32_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

void InsertSorted(std::vector<uint32_t>* v, uint32_t id) {
  if (Contains(*v, id)) return;
  v->insert(std::upper_bound(v->begin(), v->end(), id), id);
}

const char* KindName(RingChange::Kind kind) {
  switch (kind) {
    case RingChange::Kind::kRemoval:
      return "removal";
    case RingChange::Kind::kJoin:
      return "join";
    case RingChange::Kind::kReweight:
      return "reweight";
  }
  return "?";
}

}  // namespace

const char* StepName(Step::Kind kind) {
  switch (kind) {
    case Step::kPublish:
      return "publish";
    case Step::kDrain:
      return "drain";
    case Step::kSettle:
      return "settle";
    case Step::kHandoff:
      return "handoff";
    case Step::kPause:
      return "pause";
    case Step::kPublishOutcome:
      return "publish-outcome";
    case Step::kDone:
      return "done";
  }
  return "?";
}

absl::StatusOr<RingChange> RingChange::Begin(Kind kind, const CacheRingState& current,
                                             const std::vector<uint32_t>& members, uint32_t node,
                                             int attempts, absl::Duration retry_pause,
                                             CacheRingState::Weight weight) {
  const bool known = Contains(members, node);
  const bool out = Contains(current.removed, node);
  if (kind != Kind::kJoin && (!known || out)) {
    return absl::NotFoundError(absl::StrCat("no cache node ", node, " in the ring"));
  }
  if (kind == Kind::kReweight && (!std::isfinite(weight.weight) || weight.weight <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache node ", node, ": ring weight ", weight.weight, " is not positive"));
  }
  if (kind == Kind::kJoin && !known) {
    return absl::NotFoundError(absl::StrCat("unknown cache node ", node));
  }
  if (kind == Kind::kJoin && !out) {
    return absl::AlreadyExistsError(absl::StrCat("cache node ", node, " is in the ring"));
  }
  if (!current.removing.empty() || current.joining != 0 || current.reweighting.id != 0) {
    return absl::FailedPreconditionError(
        "another cache node is being removed, added or given a new weight");
  }
  size_t in_ring = 0;
  for (uint32_t id : members) in_ring += Contains(current.removed, id) ? 0 : 1;
  if (kind == Kind::kRemoval && in_ring <= 1) {
    return absl::FailedPreconditionError("cannot remove the last cache node");
  }
  RingChange c;
  c.kind_ = kind;
  c.node_ = node;
  c.attempts_ = std::max(attempts, 1);
  c.retry_pause_ = retry_pause;
  c.start_ = current;
  if (kind == Kind::kRemoval) {
    InsertSorted(&c.start_.removing, node);
  } else if (kind == Kind::kJoin) {
    c.start_.joining = node;
  } else {
    weight.id = node;
    c.start_.reweighting = weight;
  }
  c.start_.epoch = current.epoch + 1;  // a new owner never writes at the epoch of the one before
  return c;
}

Step RingChange::next() const {
  Step s;
  switch (phase_) {
    case Phase::kStart:
      s.kind = Step::kPublish;
      s.state = start_;
      break;
    case Phase::kDrain:
      s.kind = Step::kDrain;
      break;
    case Phase::kWork:
      s.kind = kind_ == Kind::kRemoval ? Step::kSettle : Step::kHandoff;
      s.state = start_;
      s.attempt = attempt_;
      break;
    case Phase::kPause:
      s.kind = Step::kPause;
      s.wait = retry_pause_;
      break;
    case Phase::kOutcome:
      s.kind = Step::kPublishOutcome;
      break;
    case Phase::kDone:
      s.kind = Step::kDone;
      break;
  }
  return s;
}

bool RingChange::Refused(const absl::Status& s, bool term_ended) {
  return term_ended || IsKind(s, ErrorKind::kStaleTerm);
}

void RingChange::Report(const absl::Status& result, bool term_ended) {
  switch (phase_) {
    case Phase::kStart:
      if (result.ok()) {
        phase_ = Phase::kDrain;
        return;
      }
      phase_ = Phase::kDone;
      status_ = absl::UnavailableError(
          absl::StrCat("cannot publish the ", KindName(kind_), " of cache node ", node_, ": ",
                       result.message()));
      return;
    case Phase::kDrain:
      phase_ = Phase::kWork;
      attempt_ = 1;
      return;
    case Phase::kWork:
      work_status_ = result;
      if (result.ok()) {
        succeeded_ = true;
        phase_ = Phase::kOutcome;
      } else if (Refused(result, term_ended) || attempt_ >= attempts_) {
        phase_ = Phase::kOutcome;
      } else {
        phase_ = Phase::kPause;
      }
      return;
    case Phase::kPause:
      phase_ = Phase::kWork;
      ++attempt_;
      return;
    case Phase::kOutcome:
      phase_ = Phase::kDone;
      if (!result.ok()) {
        status_ = absl::FailedPreconditionError(
            "not the coordinator any more: its term ended during the change; the next "
            "coordinator decides it again");
      } else {
        status_ = succeeded_ ? absl::OkStatus() : work_status_;
      }
      return;
    case Phase::kDone:
      return;
  }
}

CacheRingState RingChange::Outcome(const CacheRingState& now) const {
  CacheRingState st = now;
  std::erase(st.removing, node_);
  st.joining = 0;
  st.reweighting = {};
  if (succeeded_) {
    if (kind_ == Kind::kRemoval) {
      InsertSorted(&st.removed, node_);
    } else if (kind_ == Kind::kJoin) {
      std::erase(st.removed, node_);
    } else {
      std::erase_if(st.weights, [this](const auto& w) { return w.id == node_; });
      st.weights.insert(std::upper_bound(st.weights.begin(), st.weights.end(), node_,
                                         [](uint32_t id, const auto& w) { return id < w.id; }),
                        start_.reweighting);
    }
  }
  st.epoch = now.epoch + 1;
  return st;
}

}  // namespace ringcache::coordinator
