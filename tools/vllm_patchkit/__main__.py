import sys

from vllm_patchkit.cli import main

sys.exit(main())
