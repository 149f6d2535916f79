import sys

from vllm_overlay.doctor import main

sys.exit(main())
