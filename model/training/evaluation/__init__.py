"""The paper's metrics: retrieval ranks in both directions, sentence similarity."""
