"""Case.once: made once for the value sets of one request, anew for the next request (serve.py hands
each request's sets one `shared` dict), and a make() that raises is asked again."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kvfuzz_adapter.case import Case  # noqa: E402
from kvfuzz_adapter.guarded import Guarded  # noqa: E402

MANIFEST = {"case": {"model": {"layers": []}, "batch": {}, "dtype": "bf16", "page_size": 1, "num_tokens": 0},
            "plan": {}, "arrays": {}, "sets": {"main": {}, "probe": {}}}


def main():
    made, failures = [], []

    def make():
        made.append(len(made))
        return f"plan {len(made)}"

    def request():
        shared = {}
        return [Case(MANIFEST, "/nonexistent", s, Guarded(), shared).once("plan", make) for s in ("main", "probe")]

    first, second = request(), request()
    if first != ["plan 1", "plan 1"]:
        failures.append(f"one request's value sets got {first}, expected one plan for both")
    if second != ["plan 2", "plan 2"]:
        failures.append(f"the next request got {second}, expected a plan of its own")

    tries = []

    def refuse():
        tries.append(1)
        raise ValueError("unsupported")

    case = Case(MANIFEST, "/nonexistent", "main", Guarded(), {})
    for _ in range(2):
        try:
            case.once("refused", refuse)
        except ValueError:
            pass
    if len(tries) != 2:
        failures.append(f"a make() that raised was asked {len(tries)} times, expected 2")
    for f in failures:
        print("FAIL:", f)
    print("case_once_test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
