#include "backends/common/deadline.h"

#include <string>

#include "backends/common/backend_failure.h"

namespace kvfuzz {
namespace {

const std::atomic<bool>* g_time_up = nullptr;
thread_local int64_t t_stops = 0;

}  // namespace

void set_deadline_flag(const std::atomic<bool>* time_up) { g_time_up = time_up; }

bool time_is_up() { return g_time_up != nullptr && g_time_up->load(); }

void stop_when_time_is_up(const char* what) {
  if (!time_is_up()) return;
  ++t_stops;
  throw BackendFailure("stopped", std::string("the campaign's time is up: ") + what);
}

void count_stop() { ++t_stops; }

int64_t stops_on_this_thread() { return t_stops; }

}  // namespace kvfuzz
