// A time-bounded campaign's deadline (kvfuzz run --seconds), as the work of a case in flight sees it.
//
// Where it sits: run_campaign (fuzz/campaign.cc) points it at its flag; from then on an external
// adapter refuses every request before sending it (backends/external/adapter.cc), and a check's
// long host steps between requests (each read probe's value set, properties/opaque_extent.cc) end
// there too, so that a case in flight ends at its next such point, not after its remaining work.
// Each stop throws BackendFailure "stopped" and counts on its thread: the campaign drops a case
// whose thread counted one while it ran.
//
//   set_deadline_flag(&time_up);                 // the campaign's; nullptr: never up
//   stop_when_time_is_up("the request was not sent");
//   if (stops_on_this_thread() != before) ...     // the case was cut short
#pragma once

#include <atomic>
#include <cstdint>

namespace kvfuzz {

void set_deadline_flag(const std::atomic<bool>* time_up);
bool time_is_up();
// Throws BackendFailure "stopped" ("the campaign's time is up: " + what) once the time is up.
void stop_when_time_is_up(const char* what);
// Counts a stop this thread met another way (a request dropped in flight by a killed server).
void count_stop();
int64_t stops_on_this_thread();

}  // namespace kvfuzz
