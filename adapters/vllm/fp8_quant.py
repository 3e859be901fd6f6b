"""vLLM's per-tensor fp8 quantization of a query, as the impls call it before an fp8 kernel: the
stand-in for vllm._custom_ops.scaled_fp8_quant (a stub module here, vllm_import.py).

Used where a release quantizes the query inside the impl: the MLA fp8 decode path (mla_backends.py)
and FlashAttention's forward up to 0.10.x (0.10.2 flash_attn.py:514-518; from 0.11.0 the attention
layer quantizes it, outside the impl: "queries are quantized in the attention layer").

    ops.scaled_fp8_quant = scaled_fp8_quant
"""
import torch


def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                     output=None, group_shape=None):
    """vllm._custom_ops.scaled_fp8_quant with a per-tensor scale (static_scaled_fp8_quant): e4m3 of
    input / scale, saturated at +-448; how the fp8 decode path quantizes its query (with layer._q_scale)."""
    if scale is None or scale.numel() != 1 or num_token_padding:
        raise NotImplementedError("scaled_fp8_quant: only a static per-tensor scale is modelled")
    quantized = (input.to(torch.float32) / scale.to(torch.float32)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    if output is not None:
        output.copy_(quantized)
        quantized = output
    return quantized, scale
