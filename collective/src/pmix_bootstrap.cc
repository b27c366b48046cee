// Bootstrap over real PMIx, served by Slurm's mpi/pmix plugin (srun
// --mpi=pmix): each AllGather is Put + Commit + Fence(collect) + Get per
// rank. Values are strings (listen addresses, the hex ncclUniqueId).
#include <pmix.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "preflight/collective.h"
#include "preflight/job.h"

namespace preflight::collective {
namespace {

std::string PmixError(pmix_status_t rc) { return PMIx_Error_string(rc); }

class PmixBootstrap : public Bootstrap {
 public:
  ~PmixBootstrap() override {
    if (initialized_) PMIx_Finalize(nullptr, 0);
  }

  Status Init(const std::string& node) {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS)
      return Status::Unavailable("PMIx_Init: " + PmixError(rc) +
                                 " (start under a PMIx server: srun --mpi=pmix ...)");
    initialized_ = true;
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me_.nspace, PMIX_RANK_WILDCARD);
    auto get_u32 = [&](const pmix_proc_t* p, const char* key, uint32_t* out) -> Status {
      pmix_value_t* v = nullptr;
      pmix_status_t r = PMIx_Get(p, key, nullptr, 0, &v);
      if (r != PMIX_SUCCESS) return Status::Unavailable(std::string("PMIx_Get ") + key + ": " + PmixError(r));
      if (v->type == PMIX_UINT32) *out = v->data.uint32;
      else if (v->type == PMIX_UINT16) *out = v->data.uint16;
      else if (v->type == PMIX_INT) *out = static_cast<uint32_t>(v->data.integer);
      else { PMIX_VALUE_RELEASE(v); return Status::Unavailable(std::string("PMIx_Get ") + key + ": unexpected type"); }
      PMIX_VALUE_RELEASE(v);
      return Status::Ok();
    };
    uint32_t size = 0, lsize = 1, lrank = 0;
    Status s = get_u32(&wild, PMIX_JOB_SIZE, &size);
    if (!s.ok()) return s;
    size_ = static_cast<int>(size);
    if (get_u32(&wild, PMIX_LOCAL_SIZE, &lsize).ok()) local_size_ = static_cast<int>(lsize);
    if (get_u32(&me_, PMIX_LOCAL_RANK, &lrank).ok()) local_rank_ = static_cast<int>(lrank);
    node_ = node;
    if (node_.empty()) {
      const char* n = std::getenv("SLURMD_NODENAME");
      node_ = n && *n ? n : ShortHostname();
    }
    return Status::Ok();
  }

  const char* Name() const override { return "pmix"; }
  int Rank() const override { return static_cast<int>(me_.rank); }
  int Size() const override { return size_; }
  int LocalRank() const override { return local_rank_; }
  int LocalSize() const override { return local_size_; }
  std::string Node() const override { return node_; }

  Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) override {
    // A fresh key per exchange: PMIx may serve a re-Put key from its cache.
    std::string k = "preflight." + std::to_string(++seq_) + "." + key;
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_STRING;
    val.data.string = const_cast<char*>(mine.c_str());
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, k.c_str(), &val);
    if (rc != PMIX_SUCCESS) return Status::IOError("PMIx_Put " + k + ": " + PmixError(rc));
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS) return Status::IOError("PMIx_Commit: " + PmixError(rc));
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(nullptr, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) return Status::IOError("PMIx_Fence (" + k + "): " + PmixError(rc));
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t p;
      PMIX_LOAD_PROCID(&p, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* v = nullptr;
      rc = PMIx_Get(&p, k.c_str(), nullptr, 0, &v);
      if (rc != PMIX_SUCCESS) return Status::IOError("PMIx_Get " + k + " of rank " + std::to_string(r) + ": " + PmixError(rc));
      if (v->type == PMIX_STRING && v->data.string) out[r] = v->data.string;
      PMIX_VALUE_RELEASE(v);
    }
    return out;
  }

 private:
  pmix_proc_t me_{};
  bool initialized_ = false;
  int size_ = 1, local_rank_ = 0, local_size_ = 1;
  int seq_ = 0;
  std::string node_;
};

}  // namespace

Expected<std::unique_ptr<Bootstrap>> MakePmixBootstrap(const std::string& node) {
  auto b = std::make_unique<PmixBootstrap>();
  Status s = b->Init(node);
  if (!s.ok()) return s;
  return std::unique_ptr<Bootstrap>(std::move(b));
}

}  // namespace preflight::collective
