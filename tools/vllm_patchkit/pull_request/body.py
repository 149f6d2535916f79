"""The PR title and description, in vLLM's format.

The description starts from the checkout's own
``.github/PULL_REQUEST_TEMPLATE.md`` so it follows whatever upstream asks for
today; a built-in template with the older three sections stands in when the
checkout has none. Every section is filled: Purpose (Overview) from the fix
commit's first paragraph, Claims and Test Result from the runs that were
actually made, Test Plan from upstream's own commands (pytest on the test
files the PR adds, pre-commit), Details from the fix's reviewer notes
or the commit messages. A reviewer reproduces every figure from the PR: the
toolkit's own commands and checks stay out of it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.fixes import by_name
from vllm_patchkit.paths import cache_dir, write_atomic

TEMPLATE = Path(".github/PULL_REQUEST_TEMPLATE.md")
SECTIONS = ("Purpose", "Claims", "Test Plan", "Test Result", "Details")
"""Every section the body fills; a template without a heading for one gets
it appended (above GitHub's cut)."""
FALLBACK_TEMPLATE = "## Purpose\n\n## Test Plan\n\n## Test Result\n"
_CHECKLIST = {
    "purpose": "Purpose",
    "test plan": "Test Plan",
    "test results": "Test Result",
}
_TAG = re.compile(r"^\[([^\]]+)\]\s*")
_ROCM_TAGS = ({"ROCm"}, {"Hardware", "AMD"})
_PLACEHOLDER = re.compile(r"^PLEASE FILL IN .*$", re.MULTILINE)
_ALIASES = {"Overview": ("Purpose",), "Validation": ("Test Plan", "Test Result")}
"""Later templates' headings for the sections (0.33.0's has Overview,
Claims, Validation and Details)."""
_SENTENCE = re.compile(r"(?<=\.)\s+(?=[A-Z])")
_CUT = "**BEFORE SUBMITTING"
"""GitHub Actions removes what the template has below this line."""


@dataclass(frozen=True)
class RunRecord:
    """A command that ran for the PR and what it printed."""

    title: str
    command: str
    returncode: int
    output: str
    shown: str | None = None
    """The upstream command its output stands for in the body (None: the
    toolkit's own check, kept out of the body)."""


def pr_title(subject: str, *, vendor: bool = True) -> str:
    """``subject`` with vLLM's ``[Bugfix]`` and (``vendor``) ``[ROCm]`` prefixes.

    vLLM's contributing guide asks for a category prefix and, for hardware
    specific work, the vendor (``[Hardware][AMD]``); ``[ROCm]`` is what the
    project's ROCm PRs use and is accepted in its place. A fix of code every
    platform runs gets no vendor tag.
    """
    tags, rest = _split_tags(subject)
    has_vendor = any(group <= set(tags) for group in _ROCM_TAGS)
    vendor_tags = ["ROCm"] if vendor and not has_vendor else []
    ordered = ["Bugfix", *vendor_tags, *(tag for tag in tags if tag != "Bugfix")]
    return "".join(f"[{tag}]" for tag in ordered) + " " + rest


def is_rocm_fix(source_file: str) -> bool:
    """Whether a fix of ``source_file`` (relative to the vLLM root) is ROCm
    specific: vLLM names its ROCm modules ``rocm_*``."""
    return Path(source_file).name.startswith("rocm")


def _split_tags(subject: str) -> tuple[list[str], str]:
    tags = []
    rest = subject.strip()
    while match := _TAG.match(rest):
        tags.append(match.group(1))
        rest = rest[match.end() :]
    return tags, rest


def load_template(checkout: Path) -> tuple[str, str]:
    """The template text and where it came from."""
    path = checkout / TEMPLATE
    if path.is_file():
        return path.read_text(), str(TEMPLATE)
    return FALLBACK_TEMPLATE, "built-in template (the checkout has none)"


def fill_template(template: str, sections: dict[str, str]) -> str:
    """Put each section's text under its ``## `` heading; tick its checklist item."""
    text = _PLACEHOLDER.sub("", template).lstrip("\n")
    lines = text.splitlines()
    headings = {line[3:].strip() for line in lines if line.startswith("## ")}
    out: list[str] = []
    done = set()
    for line in lines:
        out.append(line)
        heading = line.strip().removeprefix("## ").strip()
        if line.startswith("## ") and heading in sections and heading not in done:
            out += ["", sections[heading].rstrip(), ""]
            done.add(heading)
        elif line.startswith("## ") and heading in _ALIASES:
            names = [
                name
                for name in _ALIASES[heading]
                if name in sections and name not in headings and name not in done
            ]
            for name in names:
                title = [f"### {name}", ""] if len(names) > 1 else []
                out += ["", *title, sections[name].rstrip(), ""]
                done.add(name)
        elif line.lstrip().startswith("- [ ]"):
            lowered = line.lower()
            if any(
                key in lowered and _CHECKLIST[key] in sections for key in _CHECKLIST
            ):
                out[-1] = line.replace("- [ ]", "- [x]", 1)
    cut = next((i for i, line in enumerate(out) if line.startswith(_CUT)), len(out))
    rest = []
    for name in SECTIONS:
        if name in sections and name not in done:
            rest += ["", f"## {name}", "", sections[name].rstrip(), ""]
    out[cut:cut] = rest
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n") + "\n"


def overview_section(messages: list[tuple[str, str]], references: list[str]) -> str:
    """The fix commit's first paragraph (what breaks) and the first sentence
    of its next one (the fix): the template asks for a line or two; the rest
    is in Details and the commits."""
    subject, body = messages[0]
    paragraphs = body.strip().split("\n\n") if body.strip() else [subject]
    lines = [paragraphs[0]]
    if len(paragraphs) > 1:
        lines.append(_SENTENCE.split(paragraphs[1].strip(), maxsplit=1)[0])
    if references:
        lines.append("Related: " + ", ".join(references))
    return "\n\n".join(lines)


def details_section(messages: list[tuple[str, str]], fix: str | None) -> str:
    """The fix's reviewer notes, else each commit's message.

    vLLM's commit messages stay a few short paragraphs; the reasoning a
    reviewer checks the change against (every reader of what it touches, why
    this design, what stock does on the test's paths) is a fix's ``NOTES``,
    in the module of its folder :attr:`Fix.review
    <vllm_overlay.fixes.base.Fix.review>` names.
    """
    module = by_name(fix).review if fix else ""
    notes = importlib.import_module(module).NOTES if module else None
    if notes:
        return notes.strip()
    blocks = []
    for subject, body in messages:
        blocks.append(f"**{subject}**\n\n{body.strip()}" if body.strip() else subject)
    return "\n\n".join(blocks)


def claims_section(subject: str, claims: list[str]) -> str:
    """What the PR does, then only what a run in Test Result backs."""
    tags, rest = _split_tags(subject)
    kind = "Bug fix" if "Bugfix" in tags else "Change"
    return "\n".join([f"- {kind}: {rest}.", *(f"- {claim}" for claim in claims)])


def plan_section(commands: list[str]) -> str:
    """Upstream's own commands, as a reviewer runs them in the checkout."""
    return "\n".join(["```bash", *commands, "```"])


def result_section(records: list[RunRecord], highlights: list[str]) -> str:
    blocks = [line if line.startswith("  - ") else f"- {line}" for line in highlights]
    for record in records:
        if record.shown is None:
            continue
        summary = f"<code>{record.shown}</code> (exit {record.returncode})"
        blocks += ["", collapsed(summary, [record.output.rstrip()])]
    return "\n".join(blocks)


def collapsed(summary: str, lines: list[str]) -> str:
    """``lines`` as text in a block GitHub shows folded under ``summary``."""
    block = ["```text", *lines, "```", "", "</details>"]
    return "\n".join([f"<details><summary>{summary}</summary>", "", *block])


def write_body(checkout: Path, branch: str, body: str) -> Path:
    """Keep ``body``, whole (a reader never sees half), in one file per
    checkout and branch.

    The branch is named after the fix, so every checkout preparing one fix's
    PR has the same one: a file per branch alone let one checkout's body
    replace another's under the ``--body-file`` printed for the first. The
    folder is the checkout's name (to read) and a digest of its resolved
    path (to tell apart two checkouts of one name).
    """
    resolved = checkout.resolve()
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]
    folder = f"{resolved.name}-{digest}" if resolved.name else digest
    target = cache_dir() / "pr" / folder / (branch.replace("/", "-") + ".md")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, body)
    return target
