"""Four vendor edits of ``static_sink_attention.py`` that keep ``build`` as is.

Each keeps ``StaticSinkAttentionBuilder.build`` byte for byte, yet changes
what the runner calls: a proof of ``build`` alone would call the code fixed
while the shared write still happens. The overlay must leave each alone as
unrecognised. The edits apply to every release's module (0.14.0 to 0.33.0
ship one factory) and to the installed 0.28.0.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.overlay.shadow_vllm import insert_before

BUILDER_LINE = "class StaticSinkAttentionBuilder(underlying_builder):  # type: ignore"
BUILD_LINE = "def build("
SUBCLASS_CALL = "attn_backend = subclass_attention_backend("
BUILDER_ARG = "        builder_cls=StaticSinkAttentionBuilder,\n"


def _hand_over(text: str, subclass: str) -> str:
    """Define ``subclass`` before the backend is made, and hand it over."""
    assert text.count(BUILDER_ARG) == 1
    text = insert_before(text, SUBCLASS_CALL, subclass)
    return text.replace(BUILDER_ARG, "        builder_cls=VendorSinkBuilder,\n")


def empty_subclass(text: str) -> str:
    """(a) The factory hands ``subclass_attention_backend`` an empty subclass."""
    subclass = (
        "    class VendorSinkBuilder(StaticSinkAttentionBuilder):\n        pass\n\n"
    )
    return _hand_over(text, subclass)


def super_subclass(text: str) -> str:
    """(b) A subclass whose ``build`` only calls ``super().build``."""
    subclass = (
        "    class VendorSinkBuilder(StaticSinkAttentionBuilder):\n"
        "        def build(self, common_prefix_len, common_attn_metadata,\n"
        "                  fast_build=False):\n"
        "            return super().build(\n"
        "                common_prefix_len, common_attn_metadata, fast_build\n"
        "            )\n"
        "\n"
    )
    return _hand_over(text, subclass)


def decorated_class(text: str) -> str:
    """(c) A class decorator that wraps ``build``."""
    decorator = (
        "    def vendor_traced(cls):\n"
        "        build = cls.build\n"
        "\n"
        "        def traced(self, *args, **kwargs):\n"
        "            return build(self, *args, **kwargs)\n"
        "\n"
        "        cls.build = traced\n"
        "        return cls\n"
        "\n"
        "    @vendor_traced\n"
    )
    return insert_before(text, BUILDER_LINE, decorator)


def capture_adds_sink(text: str) -> str:
    """(d) An added ``build_for_cudagraph_capture`` adding the sink in place."""
    method = (
        "        def build_for_cudagraph_capture(self, common_attn_metadata):\n"
        "            common_attn_metadata.seq_lens += self.sink_len\n"
        "            return super().build_for_cudagraph_capture(common_attn_metadata)\n"
        "\n"
    )
    return insert_before(text, BUILD_LINE, method)


SHAPES: dict[str, Callable[[str], str]] = {
    "empty-subclass": empty_subclass,
    "super-subclass": super_subclass,
    "decorated-class": decorated_class,
    "capture-adds-sink": capture_adds_sink,
}
"""The issue's four shapes, (a) to (d), by name."""
