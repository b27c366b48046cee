// preflight-healthcheck: slurmd's HealthCheckProgram= (see man preflight-healthcheck(8)).
#include "preflight/node_shell.h"

int main(int argc, char** argv) { return preflight::NodeShellMain(argc, argv, preflight::Phase::kHealth); }
