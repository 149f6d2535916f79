"""The release each remote hook repository's ``rev`` stands for.

A mirror installs a hook's tool by release, so a ``rev`` must name one.
``pre-commit autoupdate --freeze`` pins a commit and names its tag only in a
comment, ``rev: <sha>  # frozen: v0.17.2``, which a YAML parser drops; the
comment is read from the config's text here, beside each ``rev`` node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# pre-commit writes "  # frozen: v1.2.3"; any spacing, and quotes, are read.
_FROZEN = re.compile(r"""(?:^|\s)#\s*frozen:\s*(['"]?)([^\s'"#]+)\1""")


def is_commit(rev: str) -> bool:
    """A full commit id (SHA-1 or SHA-256), not a tag or branch name."""
    return bool(_COMMIT.fullmatch(rev))


@dataclass(frozen=True)
class Pin:
    """A remote repository's ``rev`` and the release its comment names."""

    rev: str
    frozen: str | None = None
    """The tag a ``# frozen:`` comment on the rev's line names, if any."""

    def release(self, known: Mapping[str, str] | None = None) -> str | None:
        """The release to install: a tag rev is its own; a commit's is the
        one its comment names, else the one ``known`` (commit -> tag) holds;
        None when nothing names one (a version is never guessed)."""
        if not is_commit(self.rev):
            return self.rev
        return self.frozen or (known or {}).get(self.rev)

    def cannot_run(self) -> str:
        return f"cannot run: pinned to commit {self.rev} with no release named"


def read_pins(text: str) -> list[Pin | None]:
    """One entry per item of the config's ``repos`` list, in order: its rev
    with the release a ``# frozen:`` comment names; None where the item
    writes no scalar ``rev`` of its own (``local``, ``meta``)."""
    try:
        document = yaml.compose(text)
    except yaml.YAMLError:
        return []
    repos = _value(document, "repos")
    if not isinstance(repos, yaml.SequenceNode):
        return []
    lines = text.splitlines()
    return [_pin(entry, lines) for entry in repos.value]


def _value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((v for k, v in node.value if k.value == key), None)


def _pin(entry: yaml.Node, lines: list[str]) -> Pin | None:
    node = _value(entry, "rev")
    if not isinstance(node, yaml.ScalarNode):
        return None
    end = node.end_mark
    rest = lines[end.line][end.column :] if end.line < len(lines) else ""
    match = _FROZEN.search(rest)
    return Pin(str(node.value), match.group(2) if match else None)
