#!/usr/bin/env bash
# What ci/sglang.sh and ci/vllm.sh share: a Python with PyTorch + Triton (CPU-usable) to run an
# engine's metadata code in, and a release's Python source unpacked from its wheel. Sourced, with
# ROOT set to the engine's install folder (.sglang, .vllm); the venv is always .sglang/venv.
#
#   source ci/engine_env.sh
#   PY=$(python_with_torch)
#   unpack_wheel vllm 0.33.0 .vllm/0.33.0 --python-version 3.12 --platform manylinux_2_28_x86_64

# shellcheck source=ci/retrying.sh
source "$(dirname "${BASH_SOURCE[0]}")/retrying.sh"

python_with_torch() {
  if python3 -c 'import torch, triton, numpy' 2>/dev/null; then echo python3; return; fi
  local venv=.sglang/venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, triton, numpy' 2>/dev/null; then
    echo "== installing torch 2.11.0 + triton 3.6.0 into $venv (about 900 MB, once)" >&2
    python3 -m venv "$venv"
    retrying "$venv/bin/pip" install -q --no-deps torch==2.11.0 triton==3.6.0 nvidia-cufile==1.15.1.6 \
      nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 >&2
    # numpy < 2.4: Triton 3.6's interpreter converts 1-element arrays with int().
    retrying "$venv/bin/pip" install -q --no-deps "numpy<2.4" packaging filelock typing_extensions "sympy==1.14.0" "mpmath<1.4" \
      networkx jinja2 markupsafe fsspec >&2
  fi
  echo "$venv/bin/python"
}

# The PyPI torch wheel's CUDA libraries not in the CUDA toolkit come from the nvidia-* wheels.
torch_cuda_libs() {
  local lib
  for lib in .sglang/venv/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$lib" ] && export LD_LIBRARY_PATH="$(realpath "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  return 0
}

# unpack_wheel PACKAGE VERSION SITE [pip download platform flags...]: the release's Python files and
# its .dist-info from its wheel (downloaded once into $ROOT/wheels), never its compiled extensions.
unpack_wheel() {
  local package=$1 version=$2 site=$3
  shift 3
  [ -d "$site/$package" ] && return
  echo "== installing $package $version's source into $site" >&2
  mkdir -p "$ROOT/wheels"
  ls "$ROOT"/wheels/"$package"-"$version"-*.whl >/dev/null 2>&1 ||
    retrying python3 -m pip download -q --no-deps --only-binary=:all: "$@" "$package==$version" -d "$ROOT/wheels" >&2
  rm -rf "$site.tmp" && mkdir -p "$site.tmp"
  python3 - "$(ls "$ROOT"/wheels/"$package"-"$version"-*.whl | head -1)" "$site.tmp" <<'PY'
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
wheel.extractall(sys.argv[2], members=[n for n in wheel.namelist() if n.endswith(".py") or ".dist-info/" in n])
PY
  mv "$site.tmp" "$site"
}

# check_kinds BACKEND ADAPTER FILE...: kvfuzz check of the cases under one adapter process (its
# imports, seconds of CPU, paid once), a line "FILE<TAB>KINDS" per case in order. KINDS: the finding
# kinds reported for BACKEND, sorted, each followed by a space; "unsupported " where the backend
# declines the case; "" when clean; "unreadable " when kvfuzz check printed no verdict for the case
# (the check itself failed: never read as clean).
check_kinds() {
  local backend=$1 adapter=$2
  shift 2
  "$KVFUZZ" check "$@" --backend "$backend" --adapter "$adapter" 2>&1 | python3 -c '
import re, sys
backend, files = sys.argv[1] + ": ", sys.argv[2:]
kinds, current = {f: None for f in files}, files[0]
for line in sys.stdin:
    if line.startswith("== ") and line[3:].rstrip("\n") in kinds:
        current = line[3:].rstrip("\n")
    elif line.startswith("unsupported: " + backend):
        kinds[current] = (kinds[current] or set()) | {"unsupported"}
    elif line.startswith(backend):
        kind = re.match(r"[a-z-]*", line[len(backend):]).group()
        kinds[current] = (kinds[current] or set()) | ({kind} - {"ok", ""})
for f in files:
    print(f + "\t" + ("unreadable " if kinds[f] is None else "".join(k + " " for k in sorted(kinds[f]))))
' "$backend" "$@" || true  # kvfuzz check exits 1 on a finding: the lines say it
}

# is_finding KINDS: check_kinds's KINDS name a finding (not clean, unsupported or unreadable)
is_finding() { [ -n "$1" ] && [ "$1" != "unsupported " ] && [[ $1 != *unreadable* ]]; }

# The tables ci/sglang.sh and ci/vllm.sh both print. They call what the sourcing script defines:
#   install RELEASE                       the release's source, once
#   found_at BACKEND CASE RELEASE         the finding kinds `kvfuzz check` reports ("" when clean)
#   backend_name BACKEND RELEASE DET      the adapter's name (DET: True for deterministic serving)
#   adapter_at BACKEND RELEASE DET        the planner command
#   family_executor BACKEND               kvfuzz's executor of the backend's family
# and read KVFUZZ. Each returns 1 when a row is not as expected.

# releases_table ROWS ISSUES_JSON ENGINE: each row "backend:case:PR:shipped:fixed", a known bug found
# in the last release with it (shipped) and gone in the first with its fix (fixed), unpatched. Gone:
# no finding of the fixed release triages as issue ENGINE#PR, a regression or NEW; a finding of
# another known issue open there may remain (shown with its issue).
#   releases_table "fa:corpus/vllm/fa_local_graph_decode.json:26034:0.10.2:0.11.0" adapters/vllm/known_issues.json vllm
releases_table() {
  local issues=$2 engine=$3 row backend file pr shipped fixed before after verdict failed=0
  printf '%-10s %-32s %-7s %-40s %-44s %s\n' backend case PR "shipped in" "fixed in" verdict
  for row in $1; do
    IFS=: read -r backend file pr shipped fixed <<<"$row"
    install "$shipped" && install "$fixed"
    before=$(found_at "$backend" "$file" "$shipped")
    after=$(triaged_at "$backend" "$file" "$fixed" "$issues")
    verdict=ok
    is_finding "$before" || verdict="NOT FOUND in $shipped"
    case " $after " in *"=$engine#$pr "*|*=NEW*|*=regression*|*=unreadable*) verdict="${verdict/ok/}; NOT GONE in $fixed" ;; esac
    [ "$verdict" = ok ] || { verdict=${verdict#; }; failed=1; }
    printf '%-10s %-32s %-7s %-40s %-44s %s\n' "$backend" "$(basename "$file" .json)" "#$pr" \
      "$shipped: ${before:-clean}" "$fixed: ${after:-clean}" "$verdict"
  done
  return $failed
}

# triaged_at BACKEND CASE RELEASE ISSUES_JSON: the case's findings at RELEASE as PROPERTY=ISSUE (or
# =NEW, =regression: the label where no open issue holds it), one per property and issue; "" when clean.
triaged_at() {
  local work
  work=$(mktemp -d)
  "$KVFUZZ" fingerprint "$2" --backend "$(backend_name "$1" "$3" False):$(family_executor "$1")" \
    --adapter "$(adapter_at "$1" "$3" False)" >"$work/f.jsonl" 2>/dev/null || true
  python3 adapters/triage.py "$work/f.jsonl" --issues "$4" --json-out "$work/t.json" >/dev/null 2>&1 || true
  python3 -c 'import json, sys; g = json.load(open(sys.argv[1]))["groups"]; print(" ".join(sorted({x["key"].split("/")[0] + "=" + (x["issue"] if x["label"] == "known" else x["label"]) for x in g})))' \
    "$work/t.json" 2>/dev/null || echo "?=unreadable"
  rm -rf "$work"
}

# known_table ISSUES_JSON: every known issue's minimal case, at the release its entry names, through
# `kvfuzz fingerprint` (its planner run with the entry's minimal_case.adapter_flags, where it names
# some): its fingerprints must triage as that issue (and nothing as NEW or a regression).
#   known_table adapters/vllm/known_issues.json
known_table() {
  local issues=$1 work id backend case release det flags labels verdict failed=0 key rows n=0
  local -A cases lines
  work=$(mktemp -d)
  rows=$(python3 -c '
import json, sys
for i in json.load(open(sys.argv[1]))["issues"]:
    m = i["minimal_case"]
    print(i["id"], m["backend"], m["case"], m["release"], m.get("deterministic", False), *m.get("adapter_flags", []))' "$issues")
  # The minimal cases of each (backend, release, mode, flags) are fingerprinted by one adapter process
  # (kvfuzz fingerprint CASE...: each line names its case file), then split by case.
  while IFS=' ' read -r id backend case release det flags; do
    key="$backend $release $det $flags"
    [[ " ${cases[$key]-} " == *" $case "* ]] || cases[$key]+=" $case"
  done <<<"$rows"
  for key in "${!cases[@]}"; do
    read -r backend release det flags <<<"$key"
    install "$release"
    n=$((n + 1)) lines[$key]=$work/group$n.jsonl
    # shellcheck disable=SC2086  # the case files are words
    "$KVFUZZ" fingerprint ${cases[$key]} --backend "$(backend_name "$backend" "$release" "$det"):$(family_executor "$backend")" \
      --adapter "$(adapter_at "$backend" "$release" "$det")${flags:+ $flags}" >"${lines[$key]}" 2>"$work/group$n.err" || true
  done
  printf '%-34s %-14s %-44s %s\n' issue release "labels (fingerprints)" verdict
  while IFS=' ' read -r id backend case release det flags; do
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        if json.loads(line).get("file") == sys.argv[2]:
            print(line, end="")
    except ValueError:
        pass' "${lines["$backend $release $det $flags"]}" "$case" >"$work/$id.jsonl"
    python3 adapters/triage.py "$work/$id.jsonl" --issues "$issues" --json-out "$work/$id.json" \
      >/dev/null 2>&1 || true  # its labels are read below
    labels=$(python3 -c 'import json, sys; g = json.load(open(sys.argv[1]))["groups"]; print(" ".join(sorted({(x["issue"] or x["label"]) + ("" if x["label"] == "known" else ":" + x["label"]) for x in g})) or "clean")' "$work/$id.json" 2>/dev/null || echo unreadable)
    verdict=ok
    case " $labels " in *" $id "*) ;; *) verdict="NOT TRIAGED AS $id" ;; esac
    case "$labels" in *NEW*|*regression*|unreadable) verdict="${verdict/ok/}; NEW, regression or unreadable" ;; esac
    [ "$verdict" = ok ] || { verdict=${verdict#; }; failed=1; }
    printf '%-34s %-14s %-44s %s\n' "$id" "$release" "$labels ($(wc -l <"$work/$id.jsonl"))" "$verdict"
  done <<<"$rows"
  rm -rf "$work"
  return $failed
}
