"""The folder put first on the PYTHONPATH of `placement trace`'s child, for its sitecustomize alone."""
