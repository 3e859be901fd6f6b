#!/usr/bin/env bash
# retrying COMMAND...: a download from PyPI, tried three times (a CI run lost vllm 0.28.0's wheel to
# one failed fetch; pip writes a wheel whole or not at all, so a retry starts clean). Sourced by
# ci/engine_env.sh and ci/repro.sh.
retrying() {
  local attempt
  for attempt in 1 2 3; do
    "$@" && return
    echo "== attempt $attempt of 3 failed: $*" >&2
    [ "$attempt" = 3 ] || sleep $((attempt * 15))
  done
  return 1
}
