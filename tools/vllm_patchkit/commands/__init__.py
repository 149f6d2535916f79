"""One module per ``vllm-patchkit`` subcommand; each has ``add_parser``."""
