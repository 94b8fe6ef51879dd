"""How the TensorFlow processes placement starts share a GPU, and which GPUs each task of `trace
--cluster --split-gpus` gets: the pure functions (no TensorFlow), and the report's words.
The real cluster runs that show each task got it are in test_cluster.py and test_trace_cluster.py."""

from __future__ import annotations

import io

import pytest

from placement_cli.model import GpuMemory
from placement_cli.runtime import gpu_policy


def test_growth_is_the_default_and_each_task_grows() -> None:
    memory = gpu_policy.decide(gpu_policy.DEFAULT, {}, gpu_tasks=3, ps_on_gpu=False)
    assert memory == GpuMemory("growth", True, None, None, False)
    assert gpu_policy.task_environment(memory, "worker") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert gpu_policy.gpu_options(memory, "worker") == {"gpu_options": {"allow_growth": True}}


def test_a_ps_kept_off_the_gpu_sees_none_and_makes_none() -> None:
    memory = gpu_policy.decide("growth", {}, gpu_tasks=2, ps_on_gpu=False)
    assert gpu_policy.task_environment(memory, "ps") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true",
                                                        "CUDA_VISIBLE_DEVICES": ""}
    assert gpu_policy.gpu_options(memory, "ps")["device_count"] == {"GPU": 0}
    on_gpu = gpu_policy.decide("growth", {}, gpu_tasks=3, ps_on_gpu=True)
    assert "CUDA_VISIBLE_DEVICES" not in gpu_policy.task_environment(on_gpu, "ps")
    assert "device_count" not in gpu_policy.gpu_options(on_gpu, "ps")


def test_share_splits_nine_tenths_among_the_tasks_on_the_gpu() -> None:
    memory = gpu_policy.decide("share", {}, gpu_tasks=3, ps_on_gpu=False)
    assert memory.memory_fraction == 0.3 and memory.allow_growth is False
    assert gpu_policy.gpu_options(memory, "worker") == {"gpu_options": {"per_process_gpu_memory_fraction": 0.3}}
    assert gpu_policy.task_environment(memory, "worker") == {}
    # TF2's coordinator makes its GPU device eagerly, where no ConfigProto reaches: it grows instead
    assert gpu_policy.task_environment(memory, "chief") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def test_whole_leaves_tensorflow_alone() -> None:
    memory = gpu_policy.decide("whole", {}, gpu_tasks=2, ps_on_gpu=True)
    assert gpu_policy.task_environment(memory, "worker") == {} and gpu_policy.gpu_options(memory, "worker") == {}


@pytest.mark.parametrize("policy", gpu_policy.POLICIES)
@pytest.mark.parametrize("yours", ["true", "false"])
def test_your_allow_growth_is_kept_and_wins(policy: str, yours: str) -> None:
    """TensorFlow reads TF_FORCE_GPU_ALLOW_GROWTH over the ConfigProto: placement never replaces it,
    and the report says what TensorFlow does."""
    memory = gpu_policy.decide(policy, {"TF_FORCE_GPU_ALLOW_GROWTH": yours}, gpu_tasks=2, ps_on_gpu=False)
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in gpu_policy.task_environment(memory, "worker")
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in gpu_policy.task_environment(memory, "chief")
    assert memory.allow_growth is (yours == "true") and memory.your_allow_growth == yours
    from placement_cli.render.cluster import gpu_memory_line

    line = gpu_memory_line(memory)
    assert f"TF_FORCE_GPU_ALLOW_GROWTH={yours}" in line or (policy == "share" and yours == "false")
    if memory.overridden:
        assert "wins" in line


def test_a_value_tensorflow_ignores_leaves_the_policy_deciding() -> None:
    memory = gpu_policy.decide("growth", {"TF_FORCE_GPU_ALLOW_GROWTH": "1"}, gpu_tasks=2, ps_on_gpu=False)
    assert memory.allow_growth is True and gpu_policy.gpu_options(memory, "worker") == {
        "gpu_options": {"allow_growth": True}}


def test_the_report_names_the_policy_in_both_languages() -> None:
    from placement_cli import i18n
    from placement_cli.render.cluster import gpu_memory_line

    growth = gpu_policy.decide("growth", {}, gpu_tasks=3, ps_on_gpu=False)
    assert gpu_memory_line(growth) == ("GPU memory: growth: each task takes GPU memory as it needs it "
                                       "(TF_FORCE_GPU_ALLOW_GROWTH=true, gpu_options.allow_growth); "
                                       'ps tasks see no GPU (CUDA_VISIBLE_DEVICES="")')
    share = gpu_policy.decide("share", {}, gpu_tasks=3, ps_on_gpu=True)
    assert "per_process_gpu_memory_fraction 0.3" in gpu_memory_line(share)
    assert "30%" in gpu_memory_line(share) and "ps tasks on the GPU too" in gpu_memory_line(share)
    with i18n.speaking("zh"):
        assert "GPU 显存" in gpu_memory_line(growth) and "TF_FORCE_GPU_ALLOW_GROWTH=true" in gpu_memory_line(growth)


def test_a_config_proto_gets_the_fields() -> None:
    """apply() sets what gpu_options() says on a ConfigProto (a stand-in with its two fields here)."""

    class Options:
        allow_growth = False
        per_process_gpu_memory_fraction = 0.0

    class Config:
        def __init__(self) -> None:
            self.gpu_options = Options()
            self.device_count: dict[str, int] = {}

    memory = gpu_policy.decide("share", {}, gpu_tasks=2, ps_on_gpu=False)
    config = gpu_policy.apply(Config(), gpu_policy.gpu_options(memory, "ps"))
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.45 and config.device_count == {"GPU": 0}


def test_inspects_child_sees_no_gpu() -> None:
    assert gpu_policy.no_gpu({"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1"}) == {"PATH": "/bin",
                                                                               "CUDA_VISIBLE_DEVICES": ""}


def test_inspect_starts_its_child_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from placement_cli.runtime.cluster import inspect

    seen = {}

    class Stop(Exception):
        pass

    def popen(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(Stop):
        inspect.run(None, "localhost:1", 1.0)
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == ""


# ---------------------------------------------------------------- --split-gpus


def test_split_gives_ps_none_and_the_others_blocks_or_round_robin() -> None:
    tasks = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    assert gpu_policy.split(tasks, ["0", "1", "2"]) == {"chief/0": "0", "worker/0": "1", "worker/1": "2", "ps/0": ""}
    assert gpu_policy.split(tasks, ["0", "1"]) == {"chief/0": "0", "worker/0": "1", "worker/1": "0", "ps/0": ""}
    assert gpu_policy.split([("worker", 0), ("worker", 1)], ["0", "1", "2", "3", "4"]) == {
        "worker/0": "0,1", "worker/1": "2,3"}
    assert gpu_policy.split(tasks, []) == dict.fromkeys(("chief/0", "worker/0", "worker/1", "ps/0"), "")


def test_the_gpus_come_from_your_cuda_visible_devices_else_the_driver(tmp_path) -> None:
    assert gpu_policy.present({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert gpu_policy.present({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpu_policy.present({"CUDA_VISIBLE_DEVICES": "1,,2"}) == ["1"]  # CUDA stops at an empty entry
    proc = tmp_path / "gpus"
    proc.mkdir()
    for bus in ("0000:00:05.0", "0000:00:06.0"):
        (proc / bus).mkdir()
    assert gpu_policy.present({}, proc=str(proc)) == ["0", "1"]


def test_a_tasks_table_shows_each_tasks_cuda_visible_devices() -> None:
    from rich.console import Console

    from placement_cli.model import ClusterTask, Report
    from placement_cli.render.cluster_trace import tasks_table

    tasks = [ClusterTask("worker", 0, cuda_visible_devices="0"), ClusterTask("ps", 0, cuda_visible_devices="")]
    out = io.StringIO()
    Console(file=out, width=200).print(tasks_table(tasks, True, Report(placements=())))
    text = out.getvalue()
    assert "CUDA_VISIBLE_DEVICES" in text and '"" (no GPU)' in text
