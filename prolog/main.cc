// preflight-prolog: slurmd's Prolog= (see man preflight-prolog(8)).
#include "preflight/node_shell.h"

int main(int argc, char** argv) { return preflight::NodeShellMain(argc, argv, preflight::Phase::kProlog); }
