"""Device-code engine: ELF reading and surgery, offload bundles, `.kpack` archives."""
