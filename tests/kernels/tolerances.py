"""How close an interpreted kernel must come, per dtype, and why.

Outputs are softmax-weighted means of values drawn from N(0, 1), so
``|o| < 4`` in practice and errors are absolute, not relative.

- float32 (accumulation in fp32, IEEE dots): each output sums at most ~650
  weighted terms; the worst-case rounding bound ``n * u * max|v|`` is
  ``650 * 6e-8 * 4 = 1.6e-4``, observed errors are ~1e-6. 1e-4 is far below
  what any masking or indexing mistake produces (>= 1e-2).
- float16: both kernels round P to fp16 before ``P @ V`` (relative 2**-11 per
  weight, so up to ``2**-11 * max|v| = 2e-3``) and round the output to fp16
  (half an ulp, <= 2**-11 * 4 = 2e-3): 5e-3 against the float64 reference.
  Overlay and upstream round at the same points and differ only in
  summation order and exp vs exp2, i.e. about one output ulp: 2e-3.
"""

from __future__ import annotations

import torch

VS_REFERENCE = {torch.float32: 1e-4, torch.float16: 5e-3}
VS_UPSTREAM = {torch.float32: 1e-4, torch.float16: 2e-3}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    """Elementwise ``|actual - expected| <= atol``; NaN anywhere fails."""
    actual, expected = actual.double(), expected.double()
    assert actual.shape == expected.shape
    assert not actual.isnan().any(), "NaN in the kernel output"
    if actual.numel() == 0:
        return
    err = (actual - expected).abs()
    worst = err.argmax()
    assert err.max() <= atol, (
        f"max error {err.max().item():.3g} > {atol:g} at flat index "
        f"{worst.item()}: got {actual.flatten()[worst].item()}, "
        f"expected {expected.flatten()[worst].item()}"
    )
