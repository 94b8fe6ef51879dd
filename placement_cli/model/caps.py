"""How many steps a timed run measures, and after how many: TensorFlow stops tracing a kernel it has
measured as cheap after about a hundred runs (its cost estimate: such a kernel then runs untraced, and a
profile holds only the expensive ones), so the steps measured come before that, as far as placement
chooses them. A module of its own: the command line's options read these as they are declared (`parse`
and `--help` load no more of the timed model)."""

MAX_STEPS = 50
MAX_WARMUP = 40
