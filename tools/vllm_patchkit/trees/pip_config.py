"""Print pip's index URLs as JSON: run as a child, never imported.

``python -m vllm_patchkit.trees.pip_config OUTPUT`` writes ``{"index_url": ...,
"extra_index_urls": [...]}`` as pip would use them (environment, then the
``download``, ``install`` and ``global`` sections of its configuration, else
pip's built-in default), so the toolkit names no index host and works the
same behind a mirror.

Why a child: importing pip into a process on Python 3.11 makes setuptools'
distutils shim hand out the standard library's ``distutils`` from then on
(pypa/pip#8761), and the next ``import setuptools`` in that process, which
vLLM's import of ``torch.utils.cpp_extension`` does, fails an assertion.
A library the tests and users' programs call in-process must not do that.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def index_urls() -> dict[str, object]:
    from pip._internal.configuration import Configuration
    from pip._internal.models.index import PyPI

    config = Configuration(isolated=False)
    config.load()
    values = dict(config.items())

    def first(option: str) -> str | None:
        for section in (":env:", "download", "install", "global"):
            value = values.get(f"{section}.{option}")
            if value:
                return str(value)
        return None

    extra = first("extra-index-url")
    return {
        "index_url": first("index-url") or PyPI.simple_url,
        "extra_index_urls": extra.split() if extra else [],
    }


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(index_urls()))
