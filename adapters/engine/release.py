"""Which release of an engine an installed site holds (from the wheel's .dist-info folder).

    release_of(".vllm/0.33.0", "vllm")   # "0.33.0"
"""
import os


def release_of(site, package):
    for entry in os.listdir(site):
        if entry.startswith(f"{package}-") and entry.endswith(".dist-info"):
            return entry[len(package) + 1:-len(".dist-info")]
    return "unknown"
