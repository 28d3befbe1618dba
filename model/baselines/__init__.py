"""Non-neural baselines of the paper's tables."""
