"""The plan-run agreement of one case: what an engine fixed at a plan step against what it passed
at the run step.

Recorders (sglang's FlashInfer wrappers, vLLM's FA3 scheduler and CUDA-graph capture) compare each
argument the plan step fixes — FlashInfer's plan() compiles the window and the soft cap into the
kernel it picks, FA3's ahead-of-time scheduler splits the batch it was shown, a CUDA graph replays
the buffers it captured — with the one the run step passes; each disagreement is reported once per
(argument, layer, where) with the plan, and kvfuzz files it as a `plan-run` finding, mechanism
plan-run:ARGUMENT (PROTOCOL.md "plan_run"), while every other property still checks the plan.

    agree = PlanRun()
    agree.check("window_left", planned=-1, ran=2, layer=0, where="paged prefill forward")
    agree.report(case)            # case.disagree(...) for each, once
"""


class PlanRun:
    def __init__(self):
        self.disagreements = {}  # (argument, layer, where) -> (planned, ran)

    def check(self, argument, planned, ran, layer=-1, where=""):
        """Records a disagreement when planned != ran; returns whether they agree."""
        if planned == ran:
            return True
        self.note(argument, planned, ran, layer, where)
        return False

    def note(self, argument, planned, ran, layer=-1, where=""):
        """Records a disagreement the caller found (planned and ran: how to show each, e.g. tensors in brief)."""
        self.disagreements.setdefault((argument, int(layer), where), (planned, ran))

    def report(self, case):
        """Hands every disagreement to the planner's case (kvfuzz_adapter PlanCase.disagree)."""
        for (argument, layer, where), (planned, ran) in sorted(self.disagreements.items(), key=str):
            case.disagree(argument, planned, ran, layer=layer, where=where)
