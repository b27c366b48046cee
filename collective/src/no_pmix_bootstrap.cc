// MakePmixBootstrap for preflight-nccl-local, the preflight-nccl built
// without libpmix: the GPU test bundle's (tests/gpu/bundle.sh), for a single
// machine with no PMIx server (and whose glibc may predate the one Debian's
// libevent, a libpmix dependency, needs). Everything else is the same
// main.cc and libraries; --intra-node (local bootstrap, ranks as threads)
// is the mode that runs there.
#include "preflight/collective.h"

namespace preflight::collective {

Expected<std::unique_ptr<Bootstrap>> MakePmixBootstrap(const std::string& node) {
  return Status::Unavailable("this preflight-nccl (preflight-nccl-local) is built without PMIx; run it with --intra-node on " +
                             node);
}

}  // namespace preflight::collective
