"""What a draft step costs the static-sink group on Model Runner V2: the
in-place refresh patch 0004 does (``update_draft_decode_metadata``) against
rebuilding the metadata (``build``), which the speculator falls back to
for a builder that declares ``supports_draft_decode_metadata_update``
false. Measured in one run, alternating, on real vLLM code.

    .venv/bin/python -m \
        vllm_patchkit.judge.regression.by_fix.static_sink.draft_update_cost \
        [TREE] [--repeat N] [--json]

TREE is a vLLM source tree carrying 0004 (default: a scratch clone of the
0.34.0 release with the series applied, made and removed by this run: the
newest release, where Model Runner V2 is the only runner). The
builder wraps Triton attention on the CPU with a sink of two blocks, for a
decode batch of ``--reqs`` requests; one sample is one draft step's host
time. On a GPU the refresh is recorded inside the speculator's CUDA graph
(no host time at all on replay), while a rebuild also costs a graph launch
per step: the CPU figure is the floor of what the fallback adds.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD_FLAG = "--child"
MODULE = "vllm_patchkit.judge.regression.by_fix.static_sink.draft_update_cost"
RELEASE = "0.34.0"


def measure(repeat: int, reqs: int) -> dict[str, float]:
    """Per-step host time of refresh and rebuild, in this process (the
    tree's vLLM on ``sys.path``)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention.static_sink_attention import (
        create_static_sink_attention_backend,
    )
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend

    from vllm_patchkit.judge.regression import harness

    config = harness.vllm_config()
    backend = create_static_sink_attention_backend(
        TritonAttentionBackend, 2 * harness.BLOCK_SIZE
    )
    builder = harness.make_builder(backend.get_builder_cls(), 1, "sink")
    if not getattr(builder, "supports_draft_decode_metadata_update", False):
        raise SystemExit("this tree's static-sink builder cannot update in place")
    common = harness.uniform_decode_metadata(reqs, 1)
    width = builder.max_num_blocks
    common.block_table_tensor = torch.arange(reqs * width, dtype=torch.int32).view(
        reqs, width
    )
    with set_current_vllm_config(config):
        metadata = builder.build(0, copy.copy(common))
        refresh, rebuild = [], []
        for _ in range(repeat):
            common.seq_lens += 1
            start = time.perf_counter()
            builder.update_draft_decode_metadata(metadata)
            refresh.append((time.perf_counter() - start) * 1e6)
            common.seq_lens += 1
            start = time.perf_counter()
            builder.build(0, copy.copy(common))
            rebuild.append((time.perf_counter() - start) * 1e6)
    return {
        "reqs": reqs,
        "repeat": repeat,
        "refresh_us": statistics.median(refresh),
        "rebuild_us": statistics.median(rebuild),
    }


def _tree_with_series(scratch: Path) -> Path:
    from vllm_patchkit.git.apply import Status, apply_series
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.paths import PATCHES_DIR
    from vllm_patchkit.trees.releases import clone_release

    tree = scratch / f"vllm-{RELEASE}"
    clone_release(RELEASE, tree, checkout=True)
    result = apply_series(tree, load_series(PATCHES_DIR))
    if result.status is not Status.APPLIED:
        raise SystemExit(f"the series did not apply to {RELEASE}: {result.status}")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--reqs", type=int, default=64)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.repeat, args.reqs)))
        return 0

    from vllm_patchkit.trees.tree_process import TreeLauncher

    with tempfile.TemporaryDirectory(prefix="vllm-overlay-bench-") as scratch:
        tree = args.tree or _tree_with_series(Path(scratch))
        env = TreeLauncher.of(tree).env()
        child = subprocess.run(
            [sys.executable, "-m", MODULE, CHILD_FLAG]
            + ["--repeat", str(args.repeat), "--reqs", str(args.reqs)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if child.returncode != 0:
        sys.stderr.write(child.stderr[-3000:])
        return 1
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result["rebuild_over_refresh"] = result["rebuild_us"] / result["refresh_us"]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"static-sink draft step, {result['reqs']} requests, median of "
            f"{result['repeat']}: refresh {result['refresh_us']:.1f} us, "
            f"rebuild {result['rebuild_us']:.1f} us "
            f"({result['rebuild_over_refresh']:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
