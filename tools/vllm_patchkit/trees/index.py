"""Find and download released vLLM source distributions.

The package index comes from pip's own configuration (environment,
``pip.conf``), with pip's built-in default when none is set, so this code
names no index host and works the same behind a mirror.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.releases import Release, parse_release
from vllm_patchkit.errors import EnvironmentFailure
from vllm_patchkit.trees.child_json import run_json_child

_JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
_CHUNK = 1 << 20


class PackageIndexError(EnvironmentFailure, RuntimeError):
    """No configured index offers the requested file, or the download failed."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


def configured_index_urls() -> list[str]:
    """pip's index URL followed by its extra index URLs, as pip would use them.

    Read by a child process (:mod:`vllm_patchkit.trees.pip_config` says why pip
    is never imported here)."""
    result = run_json_child(
        "vllm_patchkit.trees.pip_config",
        lambda output: [str(output)],
        env=os.environ,
        timeout_s=120,
        scratch_prefix="vllm-patchkit-pip-config-",
    )
    data = result.data
    if not isinstance(data, dict) or not isinstance(data.get("index_url"), str):
        raise PackageIndexError(
            "could not read pip's index configuration "
            f"(exit {result.returncode}): {result.log.strip()[-500:]}"
        )
    return [data["index_url"], *map(str, data.get("extra_index_urls", []))]


def list_files(
    project: str, index_url: str, *, strict: bool = False
) -> list[IndexFile]:
    """Files of ``project`` on one simple index (PEP 691 JSON or PEP 503 HTML).

    An index that does not answer gives no files; with ``strict`` it raises
    PackageIndexError instead (an index that answers 404 has no files).
    """
    base = index_url.rstrip("/") + f"/{project}/"
    request = urllib.request.Request(base, headers={"Accept": _JSON_ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            content_type = response.headers.get("Content-Type", "")
            payload = response.read()
    except urllib.error.HTTPError as exc:
        if strict and exc.code != 404:
            raise PackageIndexError(f"package index {base}: HTTP {exc.code}") from exc
        return []
    except (urllib.error.URLError, OSError) as exc:
        if strict:
            reason = getattr(exc, "reason", exc)
            raise PackageIndexError(
                f"package index {base} is unreachable: {reason}"
            ) from exc
        return []
    if "json" in content_type:
        data = json.loads(payload)
        return [
            IndexFile(
                f["filename"],
                urllib.parse.urljoin(base, f["url"]),
                f.get("hashes", {}).get("sha256"),
            )
            for f in data.get("files", [])
        ]
    parser = _AnchorParser()
    parser.feed(payload.decode("utf-8", "replace"))
    files = []
    for href, text in parser.anchors:
        url = urllib.parse.urljoin(base, href)
        fragment = urllib.parse.urlparse(url).fragment
        sha = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        files.append(IndexFile(text.strip(), url.split("#", 1)[0], sha))
    return files


def release_versions() -> list[str]:
    """vLLM's final releases with a source distribution on the first
    configured index, oldest first (pre-releases and dev builds are left
    out). An index that cannot be reached raises PackageIndexError: it is
    not an empty one."""
    prefix, suffix = "vllm-", ".tar.gz"
    found: dict[str, Release] = {}
    for file in list_files("vllm", configured_index_urls()[0], strict=True):
        name = file.filename
        version = name[len(prefix) : -len(suffix)]
        release = parse_release(version) if name.startswith(prefix) else None
        if name.endswith(suffix) and release is not None and "+" not in version:
            found[version] = release
    return sorted(found, key=found.__getitem__)


def find_sdist(version: str) -> IndexFile:
    """vLLM ``version``'s source distribution on the first configured index
    that has it."""
    for index_url in configured_index_urls():
        for file in list_files("vllm", index_url):
            if file.filename == f"vllm-{version}.tar.gz":
                return file
    raise PackageIndexError(
        f"no source distribution of vllm=={version} on the configured package "
        "index(es); check the version and `pip config list`"
    )


def download(file: IndexFile, dest: Path) -> Path:
    """Download to ``dest`` atomically, checking the index's sha256; a
    progress bar goes to stderr while a command shows progress."""
    from vllm_patchkit import progress as reporter

    progress = reporter.active()
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(file.url, timeout=120) as response:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            with partial.open("wb") as out:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress:
                        _progress(file.filename, done, total)
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise PackageIndexError(f"downloading {file.filename} failed: {exc}") from exc
    if progress:
        sys.stderr.write("\n")
    if file.sha256 and digest.hexdigest() != file.sha256:
        partial.unlink(missing_ok=True)
        raise PackageIndexError(
            f"{file.filename}: sha256 {digest.hexdigest()} does not match the "
            f"index's {file.sha256}"
        )
    partial.replace(dest)
    return dest


def _progress(name: str, done: int, total: int) -> None:
    if total:
        width = 30
        filled = width * done // total
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(
            f"\r  {name} [{bar}] {done / 2**20:6.1f}/{total / 2**20:.1f} MiB"
        )
    else:
        sys.stderr.write(f"\r  {name} {done / 2**20:6.1f} MiB")
    sys.stderr.flush()


class _AnchorParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.anchors.append((self._href, "".join(self._text)))
            self._href = None
