// The two clocks preflight uses: wall time for reports, monotonic time for
// every duration, deadline and timeout.
#pragma once

namespace preflight {

double NowUnix();           // seconds since the epoch (gettimeofday)
double MonotonicSeconds();  // CLOCK_MONOTONIC, seconds

}  // namespace preflight
