"""Run one of these reproductions against a vLLM tree, on a machine with no GPU.

    python docs/audit/run_reproduction.py TREE TEST_FILE [pytest args]

The reproductions are written as vLLM tests (they import the tree's own
``tests/v1/attention/utils.py``), so they run as-is in vLLM's CI. Here two
things of that helper module are pointed elsewhere before pytest collects
the test, and nothing else: the model is a local config-only copy of a tiny
llama (no download), and the device config is the CPU (vLLM cannot infer a
device type on a machine without one). Run it in the tree's runtime:
``PYTHONPATH=TREE:tools CUDA_VISIBLE_DEVICES=""`` (the tests in
tests/audit/test_reproductions.py do exactly that).
"""

from __future__ import annotations

import functools
import sys


def main(argv: list[str]) -> int:
    tree, *pytest_args = argv
    import pytest

    import tests.v1.attention.utils as vllm_test_utils
    from vllm_patchkit.judge.regression import harness

    local_model = str(harness.model_dir("llama"))
    vllm_test_utils.create_vllm_config = functools.partial(
        vllm_test_utils.create_vllm_config, model_name=local_model
    )
    vllm_test_utils.DeviceConfig = functools.partial(
        vllm_test_utils.DeviceConfig, device="cpu"
    )
    return int(
        pytest.main(["-p", "no:cacheprovider", "-q", "--rootdir", tree, *pytest_args])
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
