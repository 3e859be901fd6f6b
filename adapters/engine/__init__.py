"""What every serving-engine adapter shares (adapters/sglang/, adapters/vllm/).

Each engine adapter has the same shape: a release installer (ci/<engine>.sh) unpacks a pinned
release's Python source; `stub_import` loads that source with inert stubs for the packages its
metadata code does not compute with; a fake runner builds the engine's real metadata objects from
a kvfuzz planner request; recorders stand in for the kernels (`tensors` copies what they are
handed); a translator turns the recorded calls into a kvfuzz family plan (`page_table_plan`).
"""
