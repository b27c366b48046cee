// The storage worker of `preflight accept`: what the hidden `preflight accept
// --storage-worker` runs on each node (the orchestrator starts it under srun,
// accept_run.h). Each path is measured in turn (MeasureStorage,
// accept_storage.h) and its StorageLine printed on stdout. SIGINT and SIGTERM
// kill the running fio child's process group, so that the worker removes
// what it wrote, measures no further path and exits 128 + the signal.
#pragma once

#include <string>
#include <vector>

#include "preflight/accept_storage.h"

namespace preflight::accept {

struct StorageWorkerArgs {
  StorageOptions base;             // sizes and limits (StorageOptionsFor); path, node, tag and run set here
  std::vector<std::string> paths;  // the directories to measure, in order
  std::string node;                // this node's name (SLURMD_NODENAME, else the short host name)
  std::string tag;                 // the private directory's suffix; "" this process's id
};

// The worker's body: installs its SIGINT and SIGTERM handlers (for the whole
// process) and measures args.paths. 0, or 128 + the signal that stopped it.
int RunStorageWorker(const StorageWorkerArgs& args);

}  // namespace preflight::accept
