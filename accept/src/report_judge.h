// The verdicts' shared steps (private to accept/src): the node rows and
// stage verdicts Judge (report_judge.cc) fills, for the judges that live
// in files of their own (report_train.cc).
#pragma once

#include <string>

#include "preflight/accept_report.h"

namespace preflight::accept::judge_internal {

// The node's row, made when it has none yet.
NodeRow& RowOf(Report* r, const std::string& node);
// The node's row gets `v` (the worse one stays) and `why`.
void Blame(Report* r, const std::string& node, Verdict v, const std::string& why);
Stage* StageOf(Report* r, const std::string& name);
// The stage's verdict gets `v` (the worse one stays).
void StageVerdict(Report* r, const std::string& name, Verdict v);

// Training (report_train.cc).
void JudgeTrain(Report* r);

}  // namespace preflight::accept::judge_internal
