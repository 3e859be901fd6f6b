"""What a torch-only adapter test needs at its start and end: SKIPPED (exit 0) where a package is
missing, checks that print ok or FAIL and are counted, exit 1 when one failed.

    torch, = need("torch")
    check = Checks("vllm mla fp8 test")
    check(1 + 1 == 2, "arithmetic")
    check.exit()
"""
import importlib
import sys


def need(*packages):
    """The packages imported, or "SKIPPED: ..." printed and exit 0 (ctest: skipped, never passed)."""
    try:
        return [importlib.import_module(p) for p in packages]
    except ImportError as e:
        print(f"SKIPPED: {e}")
        sys.exit(0)


class Checks:
    def __init__(self, name):
        self.name, self.failures = name, []

    def __call__(self, ok, what):
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            self.failures.append(what)

    def exit(self):
        print(f"{self.name}: " + (f"{len(self.failures)} failure(s)" if self.failures else "ok"))
        sys.exit(1 if self.failures else 0)
