// preflight-prolog: slurmd's Prolog= (see man preflight-prolog(8)).
// The shared node main: prolog/src/node_main.cc.
#include "preflight/node_main.h"

int main(int argc, char** argv) { return preflight::NodeMain(argc, argv, preflight::Phase::kProlog); }
