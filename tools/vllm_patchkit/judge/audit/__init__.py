"""Audit a vLLM tree for metadata builders that write shared per-step state.

Each fix of the series is one instance of a class: a builder writes, in
place, a tensor of the ``CommonAttentionMetadata`` that the model runner
shares with every KV-cache group's builder. The static pass (:mod:`.static`)
reads the tree's source; the dynamic pass (:mod:`.dynamic`) runs the
builders and records what they write; :mod:`.effect` says which writes
change what later builders build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_patchkit.judge.audit.findings import AuditReport, Check, Finding

__all__ = ["AuditReport", "Check", "Finding", "audit_tree"]


def audit_tree(tree: Path, **options: Any) -> AuditReport:
    """Static findings merged with dynamic observations, classified by effect.

    Defined in :mod:`.run`, imported when called: :mod:`.effect` imports
    this package for the model, and the CLI loads nothing until it audits.
    """
    from vllm_patchkit.judge.audit.run import audit_tree as run

    return run(tree, **options)
