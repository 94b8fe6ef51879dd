"""Cluster descriptions: TensorFlow's ClusterSpec dict and TF_CONFIG, read without tensorflow."""

import json

import pytest

from placement_cli import clusterspec
from placement_cli.exceptions import UsageProblem


def test_cluster_spec_dict_lists_tasks_in_order():
    cluster = clusterspec.from_text(json.dumps({"ps": ["localhost:2222", "h:1"], "worker": ["grpc://[::1]:9"]}), "f")
    assert [t.name for t in cluster.tasks] == ["/job:ps/task:0", "/job:ps/task:1", "/job:worker/task:0"]
    assert cluster.tasks[2].target == "grpc://[::1]:9"
    assert cluster.tasks[2].host == "::1" and cluster.tasks[2].port == 9
    assert cluster.as_dict() == {"ps": ["localhost:2222", "h:1"], "worker": ["[::1]:9"]}
    assert cluster.me is None


def test_tf_config_names_this_task_and_keeps_sparse_jobs():
    text = json.dumps({"cluster": {"ps": ["a:1"], "worker": {"2": "b:2"}}, "task": {"type": "worker", "index": 2}})
    cluster = clusterspec.from_environment({"TF_CONFIG": text})
    assert cluster is not None and cluster.me == ("worker", 2) and cluster.source == "TF_CONFIG"
    assert cluster.as_dict() == {"ps": ["a:1"], "worker": {2: "b:2"}}
    assert clusterspec.from_environment({"TF_CONFIG": "  "}) is None
    assert clusterspec.from_environment({}) is None


@pytest.mark.parametrize("text, words", [
    ("[]", "JSON object"),
    ("{", "not JSON"),
    ("{}", "no jobs"),
    ('{"p s": ["a:1"]}', "not a job name"),
    ('{"ps": []}', "has no tasks"),
    ('{"ps": "a:1"}', "must list"),
    ('{"ps": ["a:0"]}', "port from 1 to 65535"),
    ('{"ps": ["a:65536"]}', "port from 1 to 65535"),
    ('{"ps": ["a"]}', "HOST:PORT"),
    ('{"ps": [5]}', "must be a string"),
    ('{"ps": ["[red]:1"]}', "HOST:PORT"),  # brackets hold an IPv6 address, nothing else
    ('{"ps": ["a:\\u0661"]}', "HOST:PORT"),  # ASCII digits only
    ('{"ps": {"x": "a:1"}}', "not a whole number"),
    ('{"ps": ["a:1"], "worker": ["a:1"]}', "given to both"),
    # one port under two spellings passed the check once and failed at run time
    ('{"ps": ["localhost:2222"], "worker": ["127.0.0.1:2222"]}', "one port of one machine under two spellings"),
    ('{"ps": ["[::1]:2222"], "worker": ["localhost:02222"]}', "two spellings"),
    ('{"ps": ["127.0.0.2:2222"], "worker": ["[::ffff:127.0.0.1]:2222"]}', "two spellings"),
    ('{"ps": ["0.0.0.0:7"], "worker": ["LOCALHOST.:7"]}', "two spellings"),
    ('{"ps": ["Host.example:7"], "worker": ["host.example.:7"]}', "two spellings"),
    ('{"ps": ["[2001:db8::1]:7"], "worker": ["[2001:0db8:0::1]:7"]}', "two spellings"),
    # a key given twice is refused, not resolved by keeping the last one
    ('{"ps": ["a:1"], "ps": ["b:2"]}', "'ps' is given twice"),
    ('{"ps": {"0": "a:1", "0": "b:2"}}', "'0' is given twice"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "type": "worker"}}', "'type' is given twice"),
    # a task-only TF_CONFIG: the cluster is missing (it was once read as a job named 'task')
    ('{"task": {"type": "worker"}}', 'no "cluster": a TF_CONFIG'),
    ('{"task": {"type": "worker", "index": 0}, "environment": "cloud"}', 'no "cluster"'),
    ('{"rpc_layer": "grpc"}', 'no "cluster"'),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}}', "not in the cluster"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": -1}}', "whole number from 0"),
    ('{"cluster": {"ps": ["a:1"]}, "task": "ps"}', "must be an object"),
    ('{"cluster": ["a:1"]}', "JSON object of job names"),
    # TensorFlow keeps task indices in an int32: a bigger one would crash the servers that read it
    ('{"ps": {"18446744073709551616": "a:1"}}', "from 0 to 2147483647"),
    ('{"ps": {"2147483648": "a:1"}}', "from 0 to 2147483647"),
    ('{"ps": {"\u00b2": "a:1"}}', "not a whole number"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 2147483648}}', "from 0 to 2147483647"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": "1e3"}}', "whole number from 0"),
    ('{"ps": [' + "9" * 5000 + ']}', "not JSON"),
])
def test_bad_descriptions_are_usage_problems_that_say_why(text, words):
    with pytest.raises(UsageProblem, match=words):
        clusterspec.from_text(text, "spec.json")


def test_tf_config_takes_an_index_written_as_a_string_as_tensorflow_does():
    config = '{"cluster": {"ps": ["a:1"], "worker": {"2147483647": "b:2"}}, "task": {"type": "worker", "index": "2147483647"}}'
    cluster = clusterspec.from_environment({"TF_CONFIG": config})
    assert cluster.me == ("worker", 2147483647)
    assert cluster.as_dict() == {"ps": ["a:1"], "worker": {2147483647: "b:2"}}


def test_files_unreadable_or_not_utf8_are_usage_problems(tmp_path):
    with pytest.raises(UsageProblem, match="file name is empty"):
        clusterspec.from_file("")
    with pytest.raises(UsageProblem, match="over 1048576"):  # read no further than that: /dev/zero ends
        clusterspec.from_file("/dev/zero")
    with pytest.raises(UsageProblem, match="is a directory"):
        clusterspec.from_file(str(tmp_path))
    with pytest.raises(UsageProblem, match="No such file"):
        clusterspec.from_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"ps": ["\xff:1"]}')
    with pytest.raises(UsageProblem, match="not a UTF-8"):
        clusterspec.from_file(str(bad))
    good = tmp_path / "good.json"
    good.write_bytes(b'\xef\xbb\xbf{"worker": ["localhost:5"]}')
    assert clusterspec.from_file(str(good)).count("worker") == 1


def test_other_machines_may_share_a_port_number():
    cluster = clusterspec.from_text(json.dumps({"ps": ["h1:2222", "10.0.0.1:2222"], "worker": ["h2:2222", "[::2]:2222"]}), "s")
    assert len(cluster.tasks) == 4
