"""Model Runner V2's draft CUDA graphs (spec_decode/target_dependent_ar/cudagraph_utils.py,
0.27.1 and 0.28.0 autoregressive/cudagraph_utils.py): the speculator's two SpeculatorCudaGraphManagers,
captured at start-up and replayed as the release's propose dispatches them, emulated on the host.

Where it sits: v2_drafting.Drafter (the speculator, its attention over the runner's persistent
buffers) -> **v2_draft_graph.py** (the managers' capture and replay) -> eagle_drafting._DraftModel
(the passes, the kernels recorded).

What runs unchanged (0.33.0 lines, target_dependent_ar/speculator.py unless named):
- `init_cudagraph_manager` (:89-107): a prefill manager in the engine's mode (decode query length
  k + 1) and a decode manager in FULL_DECODE_ONLY where the mode's decode mode is FULL, else NONE
  (query length 1); each manager's `_init_candidates` over the capture sizes
  (cudagraph_utils.py:256-394).
- `capture` (:109-162): each manager's `SpeculatorCudaGraphManager.capture` (cudagraph_utils.py of
  the speculator, :49-117): per FULL descriptor `prepare_inputs_to_capture` (the dummy batch over the
  drafter's InputBuffers, the zeroed gathered block tables, PAD slots, every draft builder's
  build_for_cudagraph_capture) and the forward it captures: the fused decode loop
  (`_generate_fused_drafts`, every draft step in one graph) where every builder refreshes decode
  metadata in place, else one decode step (`_generate_draft`).
- `propose`'s dispatch (dispatch_cg_and_sync_dp, `specialize_spec_tokens`) and, for a FULL
  descriptor, `_fused_multi_step_decode` (:544-572: map_to_kernel_block_table, then run_fullgraph)
  or `_multi_step_decode` (:492-542: each step the slot mapping and the uniform metadata rebuilt
  into the persistent buffers, then run_fullgraph).

Emulated (the host has no CUDA graphs): a captured graph is its forward function as capture made it
(the capture's metadata objects, slot mappings, padded sizes), its Python state (each metadata
object's fields) saved when capture built it; a replay restores that state and runs the forward
again over the persistent buffers as the step left them, so every kernel reads what the graph's
would: the buffers by address, the scalars capture baked. The capture pass itself runs with the
draft model inert (its kernels are the replay's). Not emulated: the warm-up pass before capture
(V2 builds the capture metadata twice; the adapter once, as v2_graph.py), PIECEWISE graphs (the
model's compiled pieces: attention runs eagerly, as under NONE). A FULL draft prefill graph (a
uniform batch of verify rows, captured over the target's buffers) is answered unsupported.

    graphs = DraftGraphs(vl, setup, speculator, model)   # init_cudagraph_manager, before the target step
    graphs.capture()                                     # the speculator's capture(), emulated
"""
import importlib
import types

from fake_runner import UnsupportedCase


def engine_mode(vl, setup):
    """The CUDA-graph mode the engine runs the speculator's managers in: V2's start-up resolution
    (v2_graph.resolve_mode) where the case runs CUDA graphs, else NONE (enforce_eager)."""
    import v2_graph

    return vl.cudagraph_mode(v2_graph.resolve_mode(vl, setup) if setup.graph else "NONE")


class _Graph:
    """One captured FULL graph: its forward as capture made it, and the Python state it baked."""

    def __init__(self, forward_fn, state):
        self.forward_fn, self.state = forward_fn, state

    def replay(self, vl, rec):
        for obj, fields in self.state:
            obj.__dict__.clear()
            obj.__dict__.update(fields)
        rec.replaying = True
        try:
            self.forward_fn(vl.cudagraph_mode("NONE"))
        finally:
            rec.replaying = False


class DraftGraphs:
    """The speculator's managers with capture and replay emulated (module docstring)."""

    def __init__(self, vl, setup, speculator, model):
        self.vl, self.sp, self.model = vl, speculator, model
        # the managers' graph memory pool: the platform's (CUDA's); the host has none
        importlib.import_module("vllm.platforms").current_platform.get_global_graph_pool = lambda: None
        speculator.init_cudagraph_manager(engine_mode(vl, setup))

    def capture(self):
        """The speculator's own capture() with each manager's graph capture emulated: the managers'
        base class capture (CudaGraphManager.capture, which SpeculatorCudaGraphManager.capture hands
        its create_forward_fn) is the emulation while it runs."""
        sp, vl = self.sp, self.vl
        managers = {id(m): (m, name) for name in ("prefill", "decode")
                    for m in [getattr(sp, f"{name}_cudagraph_manager", None)] if m is not None}
        for m, name in managers.values():
            m.run_fullgraph = self._replay(m)
            m.run_pw_graph = lambda model, model_inputs: model(**model_inputs)  # PIECEWISE: attention eager
        module = importlib.import_module(type(sp.decode_cudagraph_manager).__module__)
        base = type(sp.decode_cudagraph_manager).__mro__[1]  # the runner's CudaGraphManager
        real_prepare, real_capture = module.prepare_inputs_to_capture, base.capture
        built = []

        def prepare(*args, **kwargs):  # the capture metadata, kept to save its state
            built.append(real_prepare(*args, **kwargs))
            return built[-1]

        def capture(manager, create_forward_fn, progress_bar_desc=""):
            name = managers[id(manager)][1]
            for desc in manager._capture_descs.get(vl.cudagraph_mode("FULL"), []):
                if name == "prefill":  # captured over the target step's buffers: not modelled
                    manager.graphs[desc] = None
                    continue
                forward_fn = create_forward_fn(desc, warmup=False)
                state = _state(built[-1])
                forward_fn(vl.cudagraph_mode("NONE"))  # the captured pass, the draft model inert
                manager.graphs[desc] = _Graph(forward_fn, state)
            manager._graphs_captured = True

        module.prepare_inputs_to_capture, base.capture = prepare, capture
        self.model.inert = True
        try:
            sp.capture()
        finally:
            module.prepare_inputs_to_capture, base.capture = real_prepare, real_capture
            self.model.inert = False

    def _replay(self, manager):
        def run_fullgraph(desc):
            graph = manager.graphs[desc]
            if graph is None:
                raise UnsupportedCase("Model Runner V2 replays the draft prefill from a FULL CUDA graph (a uniform batch "
                                      "of verify rows; captured over the target step's buffers): not modelled")
            graph.replay(self.vl, self.model.rec)
        return run_fullgraph


def _state(built):
    """The Python state of the capture's metadata objects (each layer's, shared where a group's
    layers share one): restored before each replay."""
    metadata = getattr(built, "attn_metadata", None)
    if metadata is None and isinstance(built, tuple):
        metadata = built[0]
    objs = {}
    for md in (metadata or {}).values():
        objs.setdefault(id(md), md)
    return [(md, dict(vars(md))) for md in objs.values() if hasattr(md, "__dict__")]
