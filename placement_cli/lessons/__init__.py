"""Graph builders for the lessons (the guide's matmul and towers, the errors catalogue); TensorFlow is imported inside functions only."""
