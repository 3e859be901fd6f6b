#include "reference/scenario.h"

namespace kvfuzz {

std::string to_string(LayerKind k) {
  switch (k) {
    case LayerKind::full: return "full";
    case LayerKind::sliding_window: return "sliding_window";
    case LayerKind::chunked: return "chunked";
  }
  return "?";
}

std::string to_string(OpKind k) {
  switch (k) {
    case OpKind::admit: return "admit";
    case OpKind::extend: return "extend";
    case OpKind::decode: return "decode";
    case OpKind::free: return "free";
    case OpKind::swa_evict: return "swa_evict";
    case OpKind::draft: return "draft";
    case OpKind::accept: return "accept";
    case OpKind::share:
      return "share";
  }
  return "?";
}

std::string to_string(Mode m) {
  switch (m) {
    case Mode::idle: return "idle";
    case Mode::decode: return "decode";
    case Mode::extend: return "extend";
    case Mode::mixed: return "mixed";
    case Mode::target_verify: return "target_verify";
    case Mode::draft_extend_v2: return "draft_extend_v2";
    case Mode::draft_decode: return "draft_decode";
    case Mode::draft_q_only:
      return "draft_q_only";
  }
  return "?";
}

std::string to_string(Fill f) {
  switch (f) {
    case Fill::random: return "random";
    case Fill::signature: return "signature";
  }
  return "?";
}

}  // namespace kvfuzz
