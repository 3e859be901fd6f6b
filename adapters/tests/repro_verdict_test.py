"""The verdict rules every generated reproducer shares (adapters/repro/common.py, the first part of
each reproducer's harness), loaded as a module: an exception from the call under test is the bug
(exit 1), but a kernel that could not be built here is 'cannot run here' (exit 2), never the bug.

    python3 adapters/tests/repro_verdict_test.py adapters/repro/common.py
"""
import importlib.util
import sys


def main(path):
    spec = importlib.util.spec_from_file_location("reproducer", path)
    repro = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(repro)  # its main runs only as __main__
    failures = []

    def raises(message):
        def call():
            raise RuntimeError(message)
        return call

    try:
        repro.kernel_call(raises("CUDA error: an illegal memory access was encountered"))
        failures.append("a kernel's exception passed through kernel_call")
    except repro.KernelError:
        pass
    try:
        repro.kernel_call(raises("Ninja build failed. Ninja output: cute/tensor.hpp: No such file or directory"))
        failures.append("a failed JIT build passed through kernel_call")
    except repro.KernelError:
        failures.append("a failed JIT build was taken for the bug (exit 1)")
    except SystemExit as e:
        if e.code != repro.CANNOT_RUN:
            failures.append(f"a failed JIT build exited {e.code}, not {repro.CANNOT_RUN}")
    if repro.kernel_call(lambda x: x + 1, 1) != 2:
        failures.append("kernel_call did not return the call's value")
    for f in failures:
        print("FAIL:", f)
    print("repro verdict test:", "all passed" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
