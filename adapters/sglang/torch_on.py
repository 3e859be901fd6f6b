"""A backend module's `torch` on a machine without the device sglang names: CPU runs.

sglang's backends allocate some buffers on "cuda" by name (FlashInfer's updater's kv_indices, the MLA
backends' CUDA-graph state), pin host buffers, and read the SM count from the device properties.
Installed as the module's `torch` on CPU runs only: device="cuda" becomes the run's device, pinning
is dropped (nothing is copied asynchronously here), and the device properties are those of the
case's device (its SM count, else an H100's 132).

    fi.torch = TorchOn(setup.device, sms=case.batch["device_sms"])
"""
import types

import torch

H100_SMS = 132


class TorchOn:
    def __init__(self, device, sms=0):
        self._device = device
        props = types.SimpleNamespace(multi_processor_count=int(sms) or H100_SMS)
        self.cuda = types.SimpleNamespace(**{k: getattr(torch.cuda, k) for k in dir(torch.cuda) if not k.startswith("_")})
        self.cuda.get_device_properties = lambda *a, **k: props

    def __getattr__(self, name):
        value = getattr(torch, name)
        if name in ("empty", "zeros", "ones", "full", "arange", "tensor"):
            def on_device(*args, **kwargs):
                if kwargs.get("device") == "cuda":
                    kwargs["device"] = self._device
                kwargs.pop("pin_memory", None)
                return value(*args, **kwargs)
            return on_device
        return value
