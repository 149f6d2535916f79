"""Mutation power of the regression suite.

Each fix's file is rewritten in plausible wrong ways (its mutants, declared
by the fix beside its scenarios: see :mod:`.targets`); the runtime
scenarios must fail on each. ``python -m vllm_patchkit.judge.mutation``
prints the table and the kill rate.
"""
