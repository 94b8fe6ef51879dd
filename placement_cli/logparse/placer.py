"""Graph placer lines: TF 1.x/2.x ``node: (Op): device`` and the guide era's ``node: device``."""

# Node names never hold spaces; the first ": " ends them.  The op group is empty in the
# TF 0.x dialect ("b: /job:localhost/replica:0/task:0/gpu:0"), which is kind "legacy".
DEVICE = (
    rb"/job:[^\s/]+(?:/replica:\d+)?(?:/task:\d+)?"
    rb"(?:/device:[A-Za-z_][A-Za-z0-9_]*:\d+|/(?:cpu|gpu|CPU|GPU):\d+)"
)
PATTERN = rb"(\S+?): (?:\(([^\s()]*)\):? ?)?(" + DEVICE + rb")[ \t\r]*$"
GROUPS = 3  # node, op, device
