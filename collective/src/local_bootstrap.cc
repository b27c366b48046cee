// Ranks as threads of one process: the exchange is a shared table. Used by
// the unit tests and by the root-run intra-node check, where one process
// drives all of a node's ranks and no launcher is involved.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "preflight/collective.h"

namespace preflight::collective {

class LocalGroup {
 public:
  LocalGroup(int size, std::string node, unsigned timeout_ms)
      : size_(size), node_(std::move(node)), timeout_ms_(timeout_ms) {}

  Expected<std::vector<std::string>> AllGather(int rank, const std::string& key, const std::string& mine) {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& slot = slots_[key];
    if (slot.values.empty()) slot.values.resize(size_);
    slot.values[rank] = mine;
    ++slot.arrived;
    cv_.notify_all();
    bool done = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms_),
                             [&] { return slot.arrived >= size_ || !aborted_.empty(); });
    if (!aborted_.empty()) return Status::Unavailable("local bootstrap '" + key + "': " + aborted_);
    if (!done)
      return Status::Timeout("local bootstrap '" + key + "': " + std::to_string(slot.arrived) + " of " +
                             std::to_string(size_) + " ranks arrived within " + std::to_string(timeout_ms_) + " ms");
    return slot.values;
  }

  int size() const { return size_; }
  const std::string& node() const { return node_; }
  void Abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = why.empty() ? std::string("aborted") : why;
    cv_.notify_all();
  }

 private:
  struct Slot {
    std::vector<std::string> values;
    int arrived = 0;
  };
  int size_;
  std::string node_;
  unsigned timeout_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Slot> slots_;  // keys are used once per group
  std::string aborted_;                // set: every wait ends with this
};

namespace {

class LocalBootstrap : public Bootstrap {
 public:
  LocalBootstrap(std::shared_ptr<LocalGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  const char* Name() const override { return "local"; }
  int Rank() const override { return rank_; }
  int Size() const override { return g_->size(); }
  int LocalRank() const override { return rank_; }
  int LocalSize() const override { return g_->size(); }
  std::string Node() const override { return g_->node(); }
  Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) override {
    return g_->AllGather(rank_, std::to_string(++seq_) + "." + key, mine);
  }

 private:
  std::shared_ptr<LocalGroup> g_;
  int rank_;
  int seq_ = 0;  // keys are unique per exchange, as with PMIx
};

class SubBootstrap : public Bootstrap {
 public:
  SubBootstrap(Bootstrap& parent, std::vector<int> members) : p_(parent), members_(std::move(members)) {
    for (size_t i = 0; i < members_.size(); ++i)
      if (members_[i] == parent.Rank()) rank_ = static_cast<int>(i);
  }
  const char* Name() const override { return p_.Name(); }
  int Rank() const override { return rank_; }
  int Size() const override { return static_cast<int>(members_.size()); }
  int LocalRank() const override { return p_.LocalRank(); }
  int LocalSize() const override { return p_.LocalSize(); }
  std::string Node() const override { return p_.Node(); }
  Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) override {
    auto all = p_.AllGather(key, mine);
    if (!all) return all;
    std::vector<std::string> out;
    for (int m : members_) out.push_back((*all)[m]);
    return out;
  }

 private:
  Bootstrap& p_;
  std::vector<int> members_;
  int rank_ = 0;
};

}  // namespace

Status FailBackendGather(Bootstrap& boot, const Status& why) {
  boot.AllGather(kBackendGatherKey, "error: " + why.message());  // its own failure is moot
  return why;
}

std::shared_ptr<LocalGroup> MakeLocalGroup(int size, std::string node, unsigned timeout_ms) {
  return std::make_shared<LocalGroup>(size, std::move(node), timeout_ms);
}

void AbortLocalGroup(LocalGroup& group, const std::string& why) { group.Abort(why); }

std::unique_ptr<Bootstrap> MakeSubBootstrap(Bootstrap& parent, std::vector<int> members) {
  return std::make_unique<SubBootstrap>(parent, std::move(members));
}

std::unique_ptr<Bootstrap> MakeLocalBootstrap(std::shared_ptr<LocalGroup> group, int rank) {
  return std::make_unique<LocalBootstrap>(std::move(group), rank);
}

}  // namespace preflight::collective
