"""`placement trace`: the parent that runs a user's script (tracer), the child it runs the script in
(child, started by boot/sitecustomize.py), and what the child patches into TensorFlow (recording, eagerops)."""
