"""Everything that touches TensorFlow at run time. Here: start-up and its options (startup), the
private TensorFlow APIs used, each with a fallback (private), a lesson's run (run), facts read off
graphs, partition graphs and step stats, the GPU policy of several processes. Sub-packages: capture
(file descriptors and streams), trace (a user's script), cluster (one process per task).

TensorFlow is imported only inside functions here."""
