"""StaticSink's notes for an upstream reviewer: the PR's Details.

Read by the toolkit's ``pr`` (:attr:`Fix.review
<vllm_overlay.fixes.base.Fix.review>`), never by the plugin. Every claim
names a file of the tree the PR targets, or a case of the test it adds.
"""

NOTES = """\
**Root cause.** `StaticSinkAttentionBuilder.build` (made by
`create_static_sink_attention_backend` for openPangu's `StaticSinkAttention`
layers) writes the sink into `common_attn_metadata.seq_lens` in place and
reassigns `max_seq_len` and `block_table_tensor` on the object it is given.
Model Runner V2 builds that object over its persistent input buffers
(`vllm/v1/worker/gpu/attn_utils.py`) and hands it to every attention group
of the KV-cache group, so the write reaches:

- the other attention groups of the step (another static-sink group adds
  the sink a second time);
- the sampler, which reads `input_batch.seq_lens` after the build to tell a
  chunked prefill from a finished one (`vllm/v1/worker/gpu/sample/sampler.py`,
  `get_num_sampled_and_rejected`), and the rejection sampler;
- the drafter, whose inputs start from the target's `seq_lens`: a
  static-sink draft model adds the sink on top of the one already there.

**Why a refresh in `update_draft_decode_metadata`.** With the build fixed,
the builder's lengths live in a buffer of its own, and fused drafting
(`vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py`) advances the
runner's `seq_lens` in place and calls `update_draft_decode_metadata()`
between draft steps instead of building again; a FULL draft graph replays
only that call. The override re-derives both buffers from the runner's
tensors with capture-safe ops (an add into the buffer, a masked fill, a copy
of a fixed width; no host sync) before FlashAttention recomputes its
schedule from them. The smaller alternative is to opt out:
`supports_draft_decode_metadata_update = False` (set after
`super().__init__()`, since `flash_attn.py` sets it per instance) plus the
non-mutating build. The speculator then rebuilds eagerly at every draft
step, outside the fused draft graph. Only a drafter whose own layers are
static-sink pays either cost: upstream, that would be OpenPangu V2 MTP
(vllm-project/vllm#47271, open); openPangu's MTP today takes the MLA
branch. The opt-out's cost on a GPU was not measured for this PR; if
reviewers prefer it, the override goes and the test's draft-update case
expects a rebuild.

**Stock fails at capture too.** Capture builds with
`max_seq_len = max_model_len` over the runner's block table, which is
padded to a multiple of 8 blocks. With `max_model_len = 1000` and block
size 16 (63 blocks, a table of 64) the stock copy raises `The expanded size
of the tensor (63) must match the existing size (64)`; the fix sizes the
copy by the builder's buffer (`test_capture_with_a_padded_block_table`).

**Limits.** Each case runs over Triton and ROCm Octave on CPU; its
FlashAttention variant needs CUDA and skips elsewhere (3 skipped on CPU).
In `_add_sink` the block-table copy and the `seq_lens` slice write separate
buffers, so their order is not observable: the mutation figure lists that
swap as equivalent, not as a survivor. Releases with the V1 model runner
(through 0.33.0) also need the builder to opt out of `update_block_table()`,
which that runner takes for any group; main's Model Runner V2 takes it for
Mamba groups only (`attn_utils.py`), so this PR leaves it out.
"""
