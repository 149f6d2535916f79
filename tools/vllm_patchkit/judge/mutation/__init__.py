"""Mutation power of the regression suite.

The fixed ``RocmAttentionMetadataBuilder.build_for_cudagraph_capture`` is
rewritten in plausible wrong ways (:mod:`.mutants`); the runtime scenarios
must fail on each. ``python -m vllm_patchkit.judge.mutation`` prints the table and
the kill rate.
"""
