"""Stand-in for the `vllm` package (see ../README.md): only what kvledger's plugin touches."""
