// preflight-epilog: slurmd's Epilog= (see man preflight-epilog(8)).
#include "preflight/node_shell.h"

int main(int argc, char** argv) { return preflight::NodeShellMain(argc, argv, preflight::Phase::kEpilog); }
