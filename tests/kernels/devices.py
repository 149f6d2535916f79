"""Whether this machine has a GPU, decided before the kernel tier hides it.

``torch.cuda.is_available()`` is true on CUDA and on ROCm builds of torch.
Imported by conftest before it sets ``CUDA_VISIBLE_DEVICES``.
"""

import torch

HAS_GPU: bool = torch.cuda.is_available()
