"""Capture: TensorFlow's C++ output read off the file descriptors it writes (fdcapture), Python's streams
and loggers beside it (pystreams), its lines told apart from a program's own (splitter), and what every
part of runtime/ does to a file descriptor, one way (fds). Imports no TensorFlow."""
