"""The paper's six models in Flax NNX, parameter-for-parameter twins of the torch models."""
