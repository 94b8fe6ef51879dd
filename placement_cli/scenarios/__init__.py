"""Graph builders for the guide's lessons; TensorFlow is imported inside functions only."""
