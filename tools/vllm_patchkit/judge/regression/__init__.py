"""The regression suite for the capture bug, runnable against any vLLM tree.

Scenarios drive real vLLM builders on CPU. They run in whichever process
imports them, so pointing ``PYTHONPATH`` at a source tree tests that tree:
``python -m vllm_patchkit.judge.regression --json`` is what the tests and the
demo run in a subprocess for each tree.

- :mod:`.scenarios`: what is run; :mod:`.records`: what a run recorded
  (imported by scenarios and capture loop alike, so neither imports the
  other's caller); :mod:`.verdict`: what a fixed tree must show, and the
  counts of checks that passed, failed or could not run;
- :mod:`.harness`: real vLLM configs, specs and batch metadata for CPU;
- :mod:`.victims`: the builders that read the shared host offsets;
  :mod:`.survey`: finds them in a tree, statically;
- :mod:`.capture_loop`: vLLM's own per-KV-cache-group loop for capture.

Only the scenario side (scenarios, harness, victims, capture loop) imports
torch and vLLM; this package, :mod:`.records`, :mod:`.verdict` and
:mod:`.runner` do not, so the commands load them at start-up for free.
"""
