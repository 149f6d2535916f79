"""What the overlay costs at vLLM start-up: its ``register()`` against vLLM's
own ``load_general_plugins()`` without the overlay, measured in one run.

    .venv/bin/python benchmarks/plugin_registration.py [--repeat N] [--json]

Both sides are timed in this process after ``import vllm`` (which every vLLM
process has done before it loads plugins). The baseline is
``load_general_plugins()`` with ``VLLM_PLUGINS`` naming no plugin: entry
point discovery and vLLM's bookkeeping, the floor any plugin adds to. The
overlay side is one full registration of every fix of the registry: each
reads and parses the file it patches (a file that does not parse is never
patched), plans its change on the code as installed, and arms one import
hook.
It also lists every module that registration imports, so a heavy import
(Triton, vLLM's attention code) shows at once.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

from processes import arguments


def best_of(
    fn: Callable[[], None], reset: Callable[[], None], repeat: int
) -> list[float]:
    samples = []
    for _ in range(repeat):
        reset()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def spread(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples)}


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, repeat=50, release=False).parse_args(argv)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

    import vllm.plugins

    before = set(sys.modules)
    from vllm_overlay import plugin
    from vllm_overlay.import_hook import _AfterImportFinder

    plugin.register()
    imported = sorted(set(sys.modules) - before)

    def reset_vllm() -> None:
        vllm.plugins.plugins_loaded = False

    def baseline() -> None:
        os.environ["VLLM_PLUGINS"] = "no-such-plugin"
        try:
            vllm.plugins.load_general_plugins()
        finally:
            del os.environ["VLLM_PLUGINS"]

    def reset_overlay() -> None:
        plugin._states.clear()
        sys.meta_path[:] = [
            f for f in sys.meta_path if not isinstance(f, _AfterImportFinder)
        ]

    base = best_of(baseline, reset_vllm, args.repeat)
    overlay = best_of(plugin.register, reset_overlay, args.repeat)
    result = {
        "vllm_version": next(iter(plugin.current_states().values())).vllm_version,
        "repeat": args.repeat,
        "baseline_load_general_plugins_ms": spread(base),
        "overlay_register_ms": spread(overlay),
        "ratio_median": statistics.median(overlay) / statistics.median(base),
        "fixes": {
            name: str(state.action) for name, state in plugin.current_states().items()
        },
        "modules_imported_by_register": imported,
        "heavy_imports": [
            m
            for m in imported
            if m.startswith(("triton", "vllm.v1.attention.backends.rocm"))
        ],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"vLLM {result['vllm_version']}, {args.repeat} repetitions each")
        print(
            f"load_general_plugins() without the overlay: "
            f"median {result['baseline_load_general_plugins_ms']['median']:.3f} ms"
        )
        print(
            f"overlay register():                          "
            f"median {result['overlay_register_ms']['median']:.3f} ms"
        )
        print(
            "ratio (overlay / baseline):                  "
            f"{result['ratio_median']:.2f}x"
        )
        print(f"modules imported by register(): {', '.join(imported) or 'none'}")
        print(
            "decisions: " + ", ".join(f"{k}: {v}" for k, v in result["fixes"].items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
