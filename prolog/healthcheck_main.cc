// preflight-healthcheck: slurmd's HealthCheckProgram= (see man preflight-healthcheck(8)).
// The shared node main: prolog/src/node_main.cc.
#include "preflight/node_main.h"

int main(int argc, char** argv) { return preflight::NodeMain(argc, argv, preflight::Phase::kHealth); }
