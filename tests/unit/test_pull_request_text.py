"""PR title, description and upstream commit messages (pure text)."""

from __future__ import annotations

import pytest

from vllm_patchkit.pull_request.body import (
    FALLBACK_TEMPLATE,
    fill_template,
    load_template,
    pr_title,
)
from vllm_patchkit.pull_request.signoff import (
    Identity,
    signoffs,
    split_trailers,
    upstream_message,
)

ME = Identity("Fork Maintainer", "fork@example.invalid")


@pytest.mark.parametrize(
    ("subject", "title"),
    [
        ("[Bugfix][ROCm] Keep offsets", "[Bugfix][ROCm] Keep offsets"),
        ("[ROCm] Keep offsets", "[Bugfix][ROCm] Keep offsets"),
        ("[Bugfix] Keep offsets", "[Bugfix][ROCm] Keep offsets"),
        ("Keep offsets", "[Bugfix][ROCm] Keep offsets"),
        (
            "[Bugfix][Hardware][AMD] Keep offsets",
            "[Bugfix][Hardware][AMD] Keep offsets",
        ),
        ("[Hardware] Keep offsets", "[Bugfix][ROCm][Hardware] Keep offsets"),
    ],
)
def test_title_prefixes(subject: str, title: str) -> None:
    assert pr_title(subject) == title


def test_template_sections_are_filled_and_checklist_ticked() -> None:
    template = (
        "<!-- markdownlint-disable -->\n"
        "PLEASE FILL IN THE PR DESCRIPTION HERE.\n\n"
        "## Purpose\n\n## Test Plan\n\n## Test Result\n\n---\n"
        "- [ ] The purpose of the PR.\n"
        "- [ ] The test plan, such as providing test command.\n"
        "- [ ] The test results, such as before and after.\n"
        "- [ ] (Optional) The necessary documentation update.\n"
    )
    body = fill_template(
        template, {"Purpose": "why", "Test Plan": "how", "Test Result": "what"}
    )
    assert "PLEASE FILL IN" not in body
    assert "## Purpose\n\nwhy\n\n## Test Plan\n\nhow\n\n## Test Result\n\nwhat" in body
    assert body.count("- [x]") == 3
    assert "- [ ] (Optional) The necessary documentation update." in body


def test_builtin_template_and_missing_sections() -> None:
    body = fill_template(FALLBACK_TEMPLATE, {"Purpose": "why", "Test Result": "x"})
    assert body.startswith("## Purpose\n\nwhy\n")
    assert "## Test Plan\n\n## Test Result\n\nx\n" in body
    appended = fill_template("## Purpose\n", {"Purpose": "a", "Test Result": "b"})
    assert appended.endswith("## Test Result\n\nb\n")


MESSAGE = """\
[Bugfix][ROCm] Keep offsets

Body text: with a colon.

Origin: backport, vllm-project/vllm#51585
Bug: vllm-project/vllm#25985
Forwarded: not-needed
Invariant: rocm-capture-zeroes-device-offsets-only
Signed-off-by: vllm-overlay developers <dev@vllm-overlay.invalid>
"""


def test_upstream_message_keeps_upstream_trailers_only_and_signs_once() -> None:
    """No project trailer and no placeholder sign-off reach upstream; a real
    person's sign-off stays."""
    message = upstream_message(MESSAGE, ME)
    assert message == (
        "[Bugfix][ROCm] Keep offsets\n\nBody text: with a colon.\n\n"
        f"Signed-off-by: {ME}\n"
    )
    assert upstream_message(message, ME) == message
    assert [s.email for s in signoffs(message)] == [ME.email]
    colleague = "Signed-off-by: A Colleague <colleague@example.org>"
    kept = upstream_message(MESSAGE.replace("Forwarded: not-needed", colleague))
    assert kept.endswith(f"Body text: with a colon.\n\n{colleague}\n")


def test_upstream_message_without_trailers() -> None:
    assert upstream_message("Subject\n\nBody.\n") == "Subject\n\nBody.\n"
    assert upstream_message("Subject\n", ME) == f"Subject\n\nSigned-off-by: {ME}\n"


def test_only_a_trailer_paragraph_is_split_off() -> None:
    """The Purpose section is the body without trailers: a body paragraph with
    a colon in it stays (the old rule, a colon on every line, dropped it)."""
    body = "Subject\n\nBody text: with a colon.\n"
    assert split_trailers(body) == (["Subject", "Body text: with a colon."], [])
    signed = f"Subject\n\nBody.\n\nSigned-off-by: {ME}\n"
    assert split_trailers(signed) == (["Subject", "Body."], [f"Signed-off-by: {ME}"])


@pytest.mark.release_trees
def test_0_33_template_gets_the_sections_above_the_cut() -> None:
    """0.33.0's template has Overview and Validation, and GitHub Actions
    removes all below its BEFORE SUBMITTING line: nothing may land there."""
    from vllm_patchkit.trees.releases import release_tree

    template, _ = load_template(release_tree("0.33.0"))
    sections = {
        "Purpose": "WHY",
        "Claims": "CLAIMS",
        "Test Plan": "PLAN",
        "Test Result": "RESULT",
        "Details": "DETAILS",
    }
    body = fill_template(template, sections)
    kept, removed = body.split("**BEFORE SUBMITTING", 1)
    assert not any(text in removed for text in sections.values())
    overview = kept.split("## Overview", 1)[1].split("## Claims", 1)[0]
    assert "WHY" in overview
    claims = kept.split("## Claims", 1)[1].split("## Validation", 1)[0]
    assert "CLAIMS" in claims
    assert "DETAILS" in kept.split("## Details", 1)[1]
    assert kept.count("## ") == 4 + 2  # the template's headings, two ### under one
    validation = kept.split("## Validation", 1)[1].split("## Details", 1)[0]
    assert "### Test Plan\n\nPLAN" in validation
    assert "### Test Result\n\nRESULT" in validation


def test_highlight_sub_items_stay_nested() -> None:
    from vllm_patchkit.pull_request.body import result_section

    text = result_section([], ["0 passed, 2 failed.", "  - `case[1]: lengths`"])
    assert text.splitlines() == ["- 0 passed, 2 failed.", "  - `case[1]: lengths`"]


def test_a_placeholder_commit_needs_the_submitters_signoff_alone() -> None:
    """The series' placeholder is no person: its commit is sent as the
    submitter's, so DCO asks for their sign-off and nothing else."""
    from vllm_patchkit.pull_request.signoff import (
        SERIES_PLACEHOLDER,
        SeriesCommit,
        missing_signoffs,
    )

    commit = SeriesCommit(
        "0" * 40, "[Bugfix] Keep offsets", MESSAGE, SERIES_PLACEHOLDER,
        signoffs(MESSAGE),
    )  # fmt: skip
    assert commit.placeholder
    assert missing_signoffs(commit, ME) == [f"submitter {ME}"]
    other = SeriesCommit("1" * 40, "s", MESSAGE, ME, [])
    assert missing_signoffs(other, ME) == [f"author {ME}", f"submitter {ME}"]


def test_overview_is_what_breaks_and_the_fix() -> None:
    from vllm_patchkit.pull_request.body import claims_section, overview_section

    body = "It breaks.\nBadly.\n\nDo this. Then that.\n\nMore."
    overview = overview_section([("[Bugfix] Keep offsets", body)], ["x#1"])
    assert overview == "It breaks.\nBadly.\n\nDo this.\n\nRelated: x#1"
    claims = claims_section("[Bugfix][ROCm] Keep offsets", ["Test passes."])
    assert claims == "- Bug fix: Keep offsets.\n- Test passes."
