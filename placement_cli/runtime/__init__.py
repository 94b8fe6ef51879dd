"""Everything that touches TensorFlow at run time: start-up and its options, fd capture, session
config, the recorder's patches, facts read off graphs, partition graphs and the traced child.

TensorFlow is imported only inside functions here; the private TensorFlow APIs used are all in
``runtime.private``."""
