"""Plants a mutant in a copy of the code (ci/sglang.sh's seeds, ci/gpu_repro.sh's production pair).

  python3 ci/plant.py FILE OLD NEW          OLD (exactly once in FILE) replaced by NEW
  python3 ci/plant.py --release NAME SITE   the release mutant NAME in SITE (a copy of an sglang
                                            release whose file named below is a real copy)
  python3 ci/plant.py --file NAME           prints the file NAME plants in (under the release)

Exit 1, naming the file, when OLD is not there exactly once (the release moved on); exit 2 on an
unknown mutant or bad arguments."""
import os
import sys

ATTENTION = "sglang/srt/layers/attention/"
# name: (file under the release, old, new)
RELEASE_MUTANTS = {
    # the window wrapper scheduled (global_override_indptr_cpu) from the unclamped seq_lens_cpu: only
    # fast_decode_plan reads it
    "swa-schedule-unclamped": (ATTENTION + "flashinfer_backend.py", "\n                seq_lens_cpu=seq_lens_cpu_tmp,\n",
                               "\n                seq_lens_cpu=seq_lens_cpu,\n"),
    # FlashInfer MLA's decode graph replay schedules from a host kv_indptr one too large
    "mla-graph-indptr": (ATTENTION + "flashinfer_mla_backend.py",
                         "self.cuda_graph_kv_indptr_cpu[1 : bs + 1] = torch.cumsum(",
                         "self.cuda_graph_kv_indptr_cpu[1 : bs + 1] = 1 + torch.cumsum("),
}


def plant(path, old, new):
    text = open(path).read()
    if text.count(old) != 1:
        sys.exit(f"plant: the mutation no longer applies: {old!r} is in {path} {text.count(old)} times")
    open(path, "w").write(text.replace(old, new))


def main(argv):
    if len(argv) == 2 and argv[0] == "--file" and argv[1] in RELEASE_MUTANTS:
        print(RELEASE_MUTANTS[argv[1]][0])
    elif len(argv) == 3 and argv[0] == "--release" and argv[1] in RELEASE_MUTANTS:
        file, old, new = RELEASE_MUTANTS[argv[1]]
        plant(os.path.join(argv[2], file), old, new)
    elif len(argv) == 3 and not argv[0].startswith("--"):
        plant(*argv)
    else:
        print(f"usage: {__doc__}\nrelease mutants: {', '.join(RELEASE_MUTANTS)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
