"""The regression suite of every fix, runnable against any vLLM tree.

Scenarios drive real vLLM builders on CPU in whichever process imports them,
so pointing ``PYTHONPATH`` at a source tree tests that tree:
``python -m vllm_patchkit.judge.regression --json`` is what the tests and the
demo run in a subprocess for each tree. Each fix's scenarios live in
:mod:`.by_fix`; :mod:`.scenarios` runs them, :mod:`.records` holds what a run
recorded, :mod:`.verdict` judges it, on vLLM's objects from :mod:`.harness`.

Only the scenario side (scenarios, harness, each fix's runs) imports torch and
vLLM; this package, :mod:`.records`, :mod:`.verdict` and :mod:`.runner` do
not, so the commands load them at start-up for free.
"""
