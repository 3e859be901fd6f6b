# shellcheck shell=bash
# The CPU stand-ins under the kernels' own module names, for CPU runs of the GPU executors (sourced):
# standin_library DIR fa3 writes DIR/sgl_kernel/flash_attn.py (fa3_standin.py: KVFUZZ_FA3=DIR), standin_library
# DIR flashmla DIR/sgl_kernel/flash_mla.py (flashmla_standin.py: KVFUZZ_FLASHMLA_DIR=DIR). Users:
# ci/gpu_mla_pairs.sh --dry-run, adapters/tests/fa3_page_table_test.sh.
#   . adapters/repro/standins.sh && standin_library "$WORK/fa3" fa3 && KVFUZZ_FA3=$WORK/fa3 ...
standin_library() {  # standin_library DIR fa3|flashmla
  local repro
  repro=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  mkdir -p "$1/sgl_kernel" && : >"$1/sgl_kernel/__init__.py" || return 1
  case $2 in
    fa3) printf 'import sys\nsys.path.append("%s")\nfrom fa3_standin import flash_attn_with_kvcache  # noqa: E402,F401\n' \
           "$repro" >"$1/sgl_kernel/flash_attn.py" ;;
    flashmla) printf 'import sys\nsys.path.append("%s")\nfrom flashmla_standin import flash_mla_with_kvcache, get_mla_metadata  # noqa: E402,F401\n' \
           "$repro" >"$1/sgl_kernel/flash_mla.py" ;;
    *) echo "standin_library: no stand-in of $2 (fa3, flashmla)" >&2; return 2 ;;
  esac
}
