"""The worker loop: declare, then answer kvfuzz's requests until it says exit (PROTOCOL.md)."""
import json
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np

from kvfuzz_adapter.case import Case, PlanCase
from kvfuzz_adapter.declare import Unsupported
from kvfuzz_adapter.guarded import Guarded


def _channels():
    fds = os.environ.get("KVFUZZ_ADAPTER_FDS")
    if not fds:
        sys.stderr.write(
            "This is a kvfuzz adapter: kvfuzz starts it and talks to it on file descriptors 3 and 4.\n"
            f"Run it through kvfuzz, e.g.  kvfuzz check case.json --adapter 'python3 {sys.argv[0]}'\n")
        sys.exit(2)
    rfd, wfd = (int(x) for x in fds.split(","))
    return os.fdopen(rfd, "r", buffering=1), os.fdopen(wfd, "w", buffering=1)


def _check_output(value, shape, what):
    arr = np.asarray(value)
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{what} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    if arr.dtype not in (np.float16, np.float32, np.float64):
        raise ValueError(f"{what} has dtype {arr.dtype}, expected a float array (bf16: convert to float32)")
    return np.ascontiguousarray(arr)


class _Clock:
    """A request's exchange in this process, in seconds: reading the arrays kvfuzz wrote (where the
    function asks for them, through Case) and checking and writing the outputs."""

    def __init__(self):
        self.read = 0.0
        self.write = 0.0


def _execute(fn, manifest, folder, answer, clock):
    guarded = Guarded()
    shared = {}
    seconds = {}
    answered = {}  # case.precision(...): the kernel's per-case figures, sent with the answer
    results = {}
    for value_set in manifest["sets"]:
        case = Case(manifest, folder, value_set, guarded, shared, answered, clock)
        read_before = clock.read
        start = time.perf_counter()
        result = fn(case)
        # The function alone: the arrays it read in the meantime are the exchange's time.
        seconds[value_set] = time.perf_counter() - start - (clock.read - read_before)
        if not isinstance(result, tuple) or len(result) != 2:
            raise ValueError(f"the executor returned {type(result).__name__}; it must return (out, lse)")
        results[value_set] = (case.output_shapes(), result)  # not the case: a set's arrays go with it
    fetch = getattr(fn, "kvfuzz_fetch", None)
    if fetch is not None:  # the sets' outputs off the device at once: their kernels' time, shared out
        start = time.perf_counter()
        fetched = list(fetch([result for _, result in results.values()]))
        if len(fetched) != len(results):
            raise ValueError(f"fetch returned {len(fetched)} (out, lse) pairs for {len(results)} value sets")
        spent = (time.perf_counter() - start) / max(1, len(results))
        for (value_set, (shapes, _)), result in zip(list(results.items()), fetched):
            results[value_set] = (shapes, tuple(result))
            seconds[value_set] += spent
    for value_set, ((out_shape, lse_shape), result) in results.items():
        start = time.perf_counter()
        out = _check_output(result[0], out_shape, "out")
        lse = _check_output(result[1], lse_shape, "lse")
        np.save(f"{folder}/{value_set}/out.npy", out)
        np.save(f"{folder}/{value_set}/lse.npy", lse)
        clock.write += time.perf_counter() - start
    if answered:
        answer["precision"] = answered
    return guarded.violations(), seconds


def _plan(fn, manifest, folder, answer, clock):
    guarded = Guarded()
    case = PlanCase(manifest, folder, guarded, clock)
    start = time.perf_counter()
    result = fn(case)
    elapsed = time.perf_counter() - start - clock.read
    start = time.perf_counter()
    if not isinstance(result, tuple) or len(result) != 2:
        raise ValueError("the planner must return (meta dict, arrays dict)")
    meta, arrays = result
    folder_out = manifest["answer_dir"]
    for name, arr in arrays.items():
        np.save(f"{folder_out}/{name}.npy", np.ascontiguousarray(arr))
    with open(f"{folder_out}/plan.json", "w") as f:
        json.dump(meta, f)
    if case.plan_run:
        answer["plan_run"] = case.plan_run
    clock.write += time.perf_counter() - start
    return guarded.violations(), {"plan": elapsed}


class _Profile:
    """KVFUZZ_ADAPTER_PROFILE=DIR: where this process's time goes (cProfile), its 40 costliest calls
    by cumulative time written to DIR/profile-PID.txt every 50 requests (a server at a campaign's
    deadline is killed, not asked to exit). A tool for an adapter's author, off by default. With lanes
    it profiles the main thread only, which reads the requests, not the lanes' threads."""
    EVERY = 50

    @classmethod
    def from_environment(cls):
        folder = os.environ.get("KVFUZZ_ADAPTER_PROFILE")
        return cls(folder) if folder else None

    def __init__(self, folder):
        import cProfile
        os.makedirs(folder, exist_ok=True)
        self.path, self.requests = os.path.join(folder, f"profile-{os.getpid()}.txt"), 0
        self.profiler = cProfile.Profile()
        self.profiler.enable()

    def tick(self):
        self.requests += 1
        if self.requests % self.EVERY == 0:
            import io
            import pstats
            text = io.StringIO()
            pstats.Stats(self.profiler, stream=text).sort_stats("cumulative").print_stats(40)
            self.profiler.enable()  # Stats() disabled it (create_stats)
            with open(self.path + ".tmp", "w") as f:
                f.write(f"{self.requests} requests\n" + text.getvalue())
            os.replace(self.path + ".tmp", self.path)


def _answer(fn, message):
    """The answer to one request (a line of the request channel)."""
    served = time.perf_counter()
    clock = _Clock()
    answer = {"id": message.get("id")}
    try:
        with open(f"{message['dir']}/manifest.json") as f:
            manifest = json.load(f)
        work = _plan if message["op"] == "plan" else _execute
        violations, seconds = work(fn, manifest, message["dir"], answer, clock)
        answer["seconds"] = seconds
        if violations:
            answer.update(ok=False, property="in-bounds", error="; ".join(violations))
        else:
            answer["ok"] = True
    except Unsupported as e:  # the case needs what this backend does not do: not a finding
        answer.update(ok=False, unsupported=str(e) or "unsupported")
    except Exception:  # the user's code failed: a finding, and kvfuzz restarts this worker
        answer.update(ok=False, error=traceback.format_exc(limit=20))
    sys.stdout.flush()
    sys.stderr.flush()
    # This request in this process (PROTOCOL.md "timing"): kvfuzz tells the time in the adapter's
    # own code (serve - seconds - read - write) from the exchange's.
    answer["timing"] = {"serve": time.perf_counter() - served, "read": clock.read, "write": clock.write}
    return json.dumps(answer) + "\n"


def _messages(requests, profile):
    """kvfuzz's requests, one a line, until it says exit (or closes the channel)."""
    for line in requests:
        message = json.loads(line)
        if message.get("op") == "exit":
            return
        if profile:
            profile.tick()
        yield message


def _lanes(fn):
    """How many requests this process answers at once: KVFUZZ_ADAPTER_LANES when fn declared lanes
    (kv.executor(lanes=...)), else 1."""
    if getattr(fn, "kvfuzz_lanes", None) is None:
        return 1
    try:
        return max(1, int(os.environ.get("KVFUZZ_ADAPTER_LANES", "1")))
    except ValueError:
        return 1


def _serve_lanes(fn, lanes, requests, answers, profile):
    """Answers up to `lanes` requests at once: this thread reads the request lines into a queue in
    order, `lanes` threads take them up in that order (so the oldest unanswered ones are those in
    work, as kvfuzz's hang watch assumes) and write each answer, whole, under a lock. Each thread
    enters fn.kvfuzz_lanes() once for its life (a GPU executor's own CUDA stream)."""
    work, lock = queue.Queue(), threading.Lock()

    def lane():
        try:
            context = fn.kvfuzz_lanes()
            context.__enter__()
        except BaseException:  # no lane may go missing in silence: the process ends, kvfuzz sees it die
            sys.stderr.write("kvfuzz_adapter: a lane's context (kv.executor(lanes=...)) failed on entry:\n"
                             + traceback.format_exc())
            sys.stderr.flush()
            os._exit(1)
        while (message := work.get()) is not None:
            line = _answer(fn, message)
            with lock:
                answers.write(line)
        context.__exit__(None, None, None)

    threads = [threading.Thread(target=lane, name=f"lane-{i}", daemon=True) for i in range(lanes)]
    for t in threads:
        t.start()
    for message in _messages(requests, profile):
        work.put(message)
    for _ in threads:  # exit (or the channel closed): answer what is queued, then end
        work.put(None)
    for t in threads:
        t.join()


def serve(fn):
    """Answers kvfuzz's requests with fn, declared by @executor or @planner, until told to exit."""
    declaration = getattr(fn, "kvfuzz_declaration", None)
    if declaration is None:
        raise TypeError("serve() needs a function declared with @kvfuzz_adapter.executor or @kvfuzz_adapter.planner")
    requests, answers = _channels()
    lanes = _lanes(fn)
    answers.write(json.dumps(dict(declaration, lanes=lanes) if lanes > 1 else declaration) + "\n")
    profile = _Profile.from_environment()
    if lanes > 1:
        _serve_lanes(fn, lanes, requests, answers, profile)
        return
    for message in _messages(requests, profile):
        answers.write(_answer(fn, message))
