"""The builders that read the shared host offsets, and how to make each on CPU.

Every metadata builder of vLLM 0.28.0 whose ``build`` or
``build_for_cudagraph_capture`` reads ``query_start_loc_cpu`` (directly or
through a helper such as ``split_decodes_and_prefills``; see
:mod:`vllm_patchkit.judge.regression.survey`) is either a :class:`Victim`, run after
the ROCm builder on CPU, or listed in :data:`NOT_RUN` with the reason it
cannot be run here. A test keeps the two lists complete against the survey.
Torch-free at import: the fix's module names its scenarios from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_patchkit.judge.regression.recipes import Recipe, from_factory
from vllm_patchkit.judge.regression.records import involves_code_under_test


@dataclass(frozen=True)
class Victim(Recipe):
    """A builder run after the ROCm builder: its scenario and its recipe."""

    scenario: str
    """Scenario name: ``rocm_then_<short name>``."""
    module: str
    builder: str
    """Class name in ``module``; for a ``factory`` victim, the wrapper's name."""

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.builder}"


_MM3 = "vllm.models.minimax_m3"
_BACKENDS = "vllm.v1.attention.backends"

VICTIMS: tuple[Victim, ...] = (
    Victim(
        "rocm_then_aiter_fa",
        f"{_BACKENDS}.rocm_aiter_fa",
        "AiterFlashAttentionMetadataBuilder",
    ),
    Victim(
        "rocm_then_minimax_sparse",
        f"{_MM3}.common.sparse_attention",
        "MiniMaxM3SparseMetadataBuilder",
    ),
    Victim(
        "rocm_then_minimax_indexer_msa",
        f"{_MM3}.nvidia.indexer_msa",
        "MiniMaxM3IndexerMSAMetadataBuilder",
    ),
    Victim(
        "rocm_then_gdn",
        f"{_BACKENDS}.gdn_attn",
        "GDNAttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_kimi_k3_kda",
        "vllm.models.kimi_k3.nvidia.kda_metadata",
        "KimiK3KDAMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_kimi_k3_rocm_kda",
        "vllm.models.kimi_k3.amd.kda_metadata",
        "KimiK3ROCmKDAMetadataBuilder",
        spec="mamba",
        # With draft tokens its build launches a Triton kernel (no driver).
        query_lens=(1,),
    ),
    Victim(
        "rocm_then_mamba1",
        f"{_BACKENDS}.mamba1_attn",
        "Mamba1AttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_mamba2",
        f"{_BACKENDS}.mamba2_attn",
        "Mamba2AttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_short_conv",
        f"{_BACKENDS}.short_conv_attn",
        "ShortConvAttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_linear_attn",
        f"{_BACKENDS}.linear_attn",
        "LinearAttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_bailing_linear_attn",
        f"{_BACKENDS}.linear_attn",
        "BailingLinearAttentionMetadataBuilder",
        spec="mamba",
    ),
    Victim(
        "rocm_then_flex_attention",
        f"{_BACKENDS}.flex_attention",
        "FlexAttentionMetadataBuilder",
    ),
    Victim(
        "rocm_then_turboquant",
        f"{_BACKENDS}.turboquant_attn",
        "TurboQuantMetadataBuilder",
    ),
    Victim(
        "rocm_then_flash_attn",
        f"{_BACKENDS}.flash_attn",
        "FlashAttentionMetadataBuilder",
    ),
    Victim(
        "rocm_then_cross_attention",
        "vllm.model_executor.layers.attention.cross_attention",
        "CrossAttentionBuilder",
        spec="cross",
        factory="create_cross_attention_backend",
    ),
    Victim(
        "rocm_then_whisper_block_pooling",
        "vllm.model_executor.models.whisper_causal",
        "WhisperCausalAttentionWithBlockPoolingBuilder",
        factory="create_whisper_attention_backend_with_block_pooling",
        factory_kwargs={"block_pool_size": 2},
    ),
    Victim(
        "rocm_then_minimax_sparse_msa",
        f"{_MM3}.nvidia.sparse_attention_msa",
        "MiniMaxM3SparseMSAMetadataBuilder",
    ),
    Victim(
        "rocm_then_triton_mla",
        f"{_BACKENDS}.mla.triton_mla",
        "TritonMLAMetadataBuilder",
        spec="mla",
        model="deepseek",
        mla_layer=True,
    ),
    Victim(
        "rocm_then_tokenspeed_mla",
        f"{_BACKENDS}.mla.tokenspeed_mla",
        "TokenspeedMLAMetadataBuilder",
        spec="mla",
        model="deepseek",
        mla_layer=True,
    ),
    Victim(
        "rocm_then_flashmla_sparse",
        f"{_BACKENDS}.mla.flashmla_sparse",
        "FlashMLASparseMetadataBuilder",
        spec="mla",
        model="deepseek",
        mla_layer=True,
    ),
    Victim(
        "rocm_then_flashinfer_mla_sparse",
        f"{_BACKENDS}.mla.flashinfer_mla_sparse",
        "FlashInferMLASparseMetadataBuilder",
        spec="mla",
        model="deepseek",
        mla_layer=True,
    ),
    Victim(
        "rocm_then_xpu_mla_sparse",
        f"{_BACKENDS}.mla.xpu_mla_sparse",
        "XPUMLASparseMetadataBuilder",
        spec="mla",
        model="deepseek",
        mla_layer=True,
    ),
    Victim(
        "rocm_then_deepseek_v32_indexer",
        f"{_BACKENDS}.mla.indexer",
        "DeepseekV32IndexerMetadataBuilder",
        spec="indexer",
        model="deepseek",
        kwargs={"block_table_width": 16},
    ),
)
"""Builders run after the ROCm builder. MiniMax-M3's Triton indexer, the
PR's own victim, is the older ``minimax_indexer_after_rocm`` scenario."""

COVERED_ELSEWHERE: dict[str, str] = {
    f"{_MM3}.common.indexer.MiniMaxM3IndexerTritonMetadataBuilder": (
        "scenario minimax_indexer_after_rocm"
    ),
    "vllm.model_executor.layers.attention.mla_attention.MLACommonMetadataBuilder": (
        "base class; its build runs in rocm_then_triton_mla"
    ),
    "vllm.model_executor.layers.attention.sparse_mla_attention."
    "SparseMLACommonMetadataBuilder": (
        "abstract base (no metadata class); its build runs in the sparse MLA scenarios"
    ),
    f"{_BACKENDS}.mamba_attn.BaseMambaAttentionMetadataBuilder": (
        "abstract base; its build runs in the mamba1/mamba2/short_conv scenarios"
    ),
    f"{_BACKENDS}.rocm_attn.RocmAttentionMetadataBuilder": (
        "the builder under test: its capture is what zeroes the offsets"
    ),
}

_NEEDS_CUDA = "importing or constructing it needs CUDA torch or a CUDA extension"
_NEEDS_AITER = "needs the ROCm-only `aiter` package"
_REPEAT_INTERLEAVE = (
    "its build calls CommonAttentionMetadata.token_to_req_indices, whose "
    "repeat_interleave gets the device query lengths (zeroed by the ROCm "
    "capture, as intended) with output_size from the host offsets; CPU torch "
    "checks the two agree and raises, CUDA does not check, so on CPU the fixed "
    "code fails where the GPU would not"
)
NOT_RUN: dict[str, str] = {
    f"{_BACKENDS}.flashinfer.FlashInferMetadataBuilder": _NEEDS_CUDA,
    f"{_BACKENDS}.mla.cutlass_mla.CutlassMLAMetadataBuilder": _NEEDS_CUDA,
    f"{_BACKENDS}.mla.flashinfer_mla.FlashInferMLAMetadataBuilder": _NEEDS_CUDA,
    f"{_BACKENDS}.mla.flashattn_mla_sparse.FlashAttnMLASparseMetadataBuilder": (
        _NEEDS_CUDA
    ),
    "vllm.model_executor.layers.attention.chunked_local_attention."
    "ChunkedLocalAttentionBuilder": (
        "its CUDA graph support is NEVER: a model using it is never captured "
        "in full graphs, so it never runs after the ROCm capture"
    ),
    "vllm.models.deepseek_v4.sparse_mla.DeepseekV4FlashMLAMetadataBuilder": (
        _REPEAT_INTERLEAVE
    ),
    f"{_BACKENDS}.hpc_attn.HpcAttnMetadataBuilder": "needs the `hpc` package",
    f"{_BACKENDS}.mla.flashmla.FlashMLAMetadataBuilder": _NEEDS_CUDA,
    f"{_BACKENDS}.mla.flashattn_mla.FlashAttnMLAMetadataBuilder": _NEEDS_CUDA,
    f"{_BACKENDS}.mla.rocm_aiter_mla.AiterMLAMetadataBuilder": _NEEDS_AITER,
    f"{_BACKENDS}.mla.rocm_aiter_mla_sparse.ROCMAiterMLASparseMetadataBuilder": (
        _NEEDS_AITER
    ),
    "vllm.models.deepseek_v4.amd.rocm.DeepseekV4ROCMAiterMLASparseMetadataBuilder": (
        _NEEDS_CUDA
    ),
    "vllm.models.deepseek_v4.amd.rocm.DeepseekV4ROCMAiterSparseSWAMetadataBuilder": (
        _NEEDS_CUDA
    ),
    "vllm.models.dots3_note.nvidia.attention.Dots3NoteMLAMetadataBuilder": (
        "its module does not import in the 0.28.0 wheel (imports "
        "compile_flash_attn_varlen_func_from_specs, absent from fa_utils)"
    ),
    f"{_BACKENDS}.mla.sparse_swa.DeepseekSparseSWAMetadataBuilder": _REPEAT_INTERLEAVE,
    "vllm.models.deepseek_v4.nvidia.flashmla."
    "DeepseekSparseSWAFlashMLAMetadataBuilder": _REPEAT_INTERLEAVE,
    "vllm.models.deepseek_v4.sparse_mla.DeepseekV4SparseMLAMetadataBuilder": (
        _REPEAT_INTERLEAVE
    ),
    "vllm.models.deepseek_v4.compressor.CompressorMetadataBuilder": _REPEAT_INTERLEAVE,
    "vllm.models.inkling.amd.sconv_swa_attn.InklingSconvMetadataBuilder": (
        "its build launches a Triton kernel; CPU has no Triton driver"
    ),
    "vllm.models.inkling.nvidia.sconv_swa_attn.InklingSconvMetadataBuilder": (
        "its build launches a Triton kernel; CPU has no Triton driver"
    ),
}
"""Readers of the host offsets not run on CPU, with the reason."""


class VictimUnavailable(Exception):
    """The victim cannot be set up on this tree (absent, or another API)."""


def builder_class(victim: Victim) -> type:
    """The victim's builder class in this tree, or VictimUnavailable."""
    from vllm_patchkit.judge.regression import harness

    try:
        module = harness.import_vllm(victim.module)
        if victim.factory is None:
            return getattr(module, victim.builder)
        return from_factory(module, victim)
    except (ImportError, AttributeError) as exc:
        if involves_code_under_test(exc):
            raise  # the ROCm backend itself is broken: a failure, not absence
        raise VictimUnavailable(f"{type(exc).__name__}: {exc}") from exc


RECIPES: dict[str, Recipe] = {victim.qualname: victim for victim in VICTIMS}
"""Each victim's recipe, by its builder's qualified name: the audit makes
these builders as this fix's scenarios do."""
