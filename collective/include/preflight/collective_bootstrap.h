// How the ranks of a collective check find each other: PMIx under srun,
// threads of one process for the intra-node check and the tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight::collective {

// --- bootstrap: how ranks find each other ---------------------------------
// AllGather is collective: every rank calls it with the same key, in the same
// order; the result holds every rank's value, indexed by rank.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual const char* Name() const = 0;  // "pmix", "local"
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  virtual int LocalRank() const = 0;     // rank among the ranks on this node
  virtual int LocalSize() const = 0;
  virtual std::string Node() const = 0;  // this rank's node name
  virtual Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) = 0;
};

// Ranks that are threads of one process (unit tests, the root-run intra-node
// check). Create one LocalGroup, then one LocalBootstrap per thread.
class LocalGroup;
std::shared_ptr<LocalGroup> MakeLocalGroup(int size, std::string node, unsigned timeout_ms);
std::unique_ptr<Bootstrap> MakeLocalBootstrap(std::shared_ptr<LocalGroup> group, int rank);
// Ends every present and later wait of the group's ranks with `why` (a rank
// that could not be started must not leave the others waiting out the timeout).
void AbortLocalGroup(LocalGroup& group, const std::string& why);

// A group of some of `parent`'s ranks (`members`, by parent rank), for
// tests between node pairs inside one launch. Used only by members; every
// AllGather is still the parent's (a fence over all ranks), so each
// non-member must make the same calls on the parent with an empty value.
std::unique_ptr<Bootstrap> MakeSubBootstrap(Bootstrap& parent, std::vector<int> members);

// Real PMIx through the launcher (Slurm's mpi/pmix: `srun --mpi=pmix`):
// PMIx_Init, then Put/Commit/Fence(collect)/Get per AllGather. Unavailable
// when not started under a PMIx server. `node` overrides the node name
// (default $SLURMD_NODENAME, else the host name).
Expected<std::unique_ptr<Bootstrap>> MakePmixBootstrap(const std::string& node);

}  // namespace preflight::collective
