"""FedMosaic (RELA + PQ-LoRA) core: see config, pqlora, blocks, alignment, rela, hetlora, accounting."""
