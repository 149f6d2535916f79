"""Which swapped pairs of a fix's statements are the same program.

A swap that commutes cannot be told apart from the fix by any test, so it is
named as equivalent instead of counted as a survivor; a swap that may change
what runs must stay a mutant. Each case is a real method body.
"""

from __future__ import annotations

import ast

import pytest

from vllm_patchkit.judge.mutation.statements import commute, swapped

CLASS = """\
class Builder:
    def refresh(self, n):
{body}
"""


def _pair(first: str, second: str) -> str:
    body = ast.parse(f"{first}\n{second}").body
    return commute(body[0], body[1])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Two buffers of the builder's own, one written, one sliced.
        ("self.table[:2, 1:3] = rows", "lens = self.lens[: self.count]"),
        ("a = b + 1", "c = d[e]"),
        ("self.x: int = 1", "self.y = 2"),
    ],
)
def test_disjoint_assignments_commute(first: str, second: str) -> None:
    why = _pair(first, second)
    assert why.startswith("equivalent: ")
    assert "neither reads what the other writes" in why


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("rows = self.table[:, :n]", "self.out[:2] = rows"),  # reads what 1 writes
        ("lens = self.lens[:n]", "lens = self.other[:n]"),  # both write lens
        ("self.a = x", "y = self.a.b"),  # writes the object under the chain
        ("self.a.b = x", "y = self.a"),  # writes a part of what 2 reads
        ("self.t[:n] = x", "y = self.t[0]"),  # writes into what 2 reads
        ("x = f(a)", "y = b"),  # a call may touch anything
        ("torch.add(a, 1, out=b)", "c = d"),  # not an assignment
        ("x = (y := 1)", "z = 2"),  # a walrus writes too
        ("x[i] = 1", "i = 2"),  # the index is read
        ("return a", "b = 1"),
    ],
)
def test_pairs_that_may_differ_do_not(first: str, second: str) -> None:
    assert _pair(first, second) == ""


def test_swapped_marks_only_the_commuting_pair() -> None:
    body = "\n".join(
        "        " + line
        for line in (
            "rows = self.runner[:, :n]",
            "self.table[:2, 1:3] = rows",
            "lens = self.lens[:2]",
            "torch.add(self.runner_lens, 1, out=lens)",
        )
    )
    mutants = swapped(CLASS.format(body=body), "Builder", ("refresh",))

    assert [bool(m.equivalent) for m in mutants] == [False, True, False]
    for mutant in mutants:
        compile(mutant.source, mutant.name, "exec")
    assert "self.table" in mutants[1].equivalent
