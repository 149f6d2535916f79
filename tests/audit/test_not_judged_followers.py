"""A follower the effect pass could not compare is named in the finding.

A follower that builds differently from the same input twice cannot say
whether a write changed it. Such a write is ``latent`` only on the
comparisons that were made, and its reason says which were not: a
``latent`` never hides a check that did not run. The child reports effects
through JSON, so the names must survive that too.
"""

from __future__ import annotations

from vllm_patchkit.judge.audit import effect
from vllm_patchkit.judge.audit.dynamic import (
    DynamicResult,
    Effect,
    ObservedWrite,
    from_json,
)

WRITER = "vllm.v1.attention.backends.example.WriterBuilder"
FOLLOWER = "vllm.v1.attention.backends.example.FollowerBuilder (build, q=1)"


def _result(effect_: Effect) -> DynamicResult:
    write = ObservedWrite(
        file="vllm/v1/attention/backends/example.py",
        line=10,
        field="seq_lens",
        method="WriterBuilder.build",
        operation="fill_",
        builder=WRITER,
        mode="build",
        changed=True,
    )
    return DynamicResult("example", 0, writes=[write], effects=[effect_])


def test_a_follower_not_compared_is_named_in_a_latent_finding() -> None:
    result = _result(Effect(WRITER, "build", "seq_lens", "in place"))
    result.effects[0].not_judged.append(FOLLOWER)
    (finding,) = effect.classify(from_json(result.to_json()))
    assert finding.kind == "latent"
    assert finding.victims == []
    assert finding.reason == (
        f"written by WriterBuilder (build); not judged against {FOLLOWER} "
        "(it builds differently from the same input)"
    )


def test_a_finding_whose_followers_were_all_compared_says_nothing_more() -> None:
    result = _result(Effect(WRITER, "build", "seq_lens", "in place"))
    result.effects[0].victims.append(FOLLOWER)
    (finding,) = effect.classify(from_json(result.to_json()))
    assert finding.kind == "harmful"
    assert finding.victims == [FOLLOWER]
    assert finding.reason == "written by WriterBuilder (build)"
