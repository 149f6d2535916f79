"""The overlay's own attention kernels; importing them never imports vLLM."""
