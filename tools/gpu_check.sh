#!/usr/bin/env bash
# Run placement's GPU paths on a machine with an NVIDIA GPU and keep everything they printed.
#
#   tools/gpu_check.sh [--allow-cpu] [--suite | --only commands|suite] [FOLDER]
#
# FOLDER (default gpu-check-YYYYmmdd-HHMMSS) receives, per command, its tables with TensorFlow's raw
# log where the command has --log (NAME.txt), its JSON (NAME.json), what it wrote on stderr
# (NAME.txt.err, NAME.json.err), and summary.tsv: each command's exit code beside the one expected,
# and its seconds; machine.txt says what ran where. Commands: the GPU-marked tests (not with --suite,
# which runs them), placement devices, show (unpinned and pinned to /gpu:0), tower (also timed: --time,
# its step as a Chrome trace in tower-timed.trace.json) and train on two
# GPUs (two logical GPUs carved from one where there is only one: --virtual-gpus 2), mirrored on the
# same devices, errors, the demo (every step, not pausing), cluster (a ps and two workers: several
# TensorFlow processes on one GPU) and trace --cluster worker=2 of samples/multi_worker.py
# (MultiWorkerMirroredStrategy; each task's own log in trace-cluster-logs/). The recorded logs are
# fixtures for the parser's tests.
#
# The commands run side by side, from the repository's root (GPU_CHECK_JOBS at once, default a
# quarter of the cores, 2 at least), each under a time limit (one past it is ended: exit code 124).
# Where a GPU exists, the one-process commands get TF_FORCE_GPU_ALLOW_GROWTH=true, so that they share
# the GPU (summary.tsv shows it); the demo, cluster and trace --cluster run with the environment as
# it is (placement's own policy for the processes they start), beside the others on one GPU, alone at
# the end on several (a process that makes devices on several GPUs reserves them whole).
#
#   --allow-cpu     run without a GPU too (to try this script): the GPU runs ask for /gpu:0,/gpu:1 with
#                   soft placement where the command has it, and mirrored stays on logical CPUs
#   --suite         also run the whole test suite, beside the commands: pytest -v -rA (every test's
#                   name and outcome, kept in tests-suite.txt as it runs, so a time-out still says which
#                   failed), GPU_CHECK_WORKERS workers (default: half the cores, 2 to 8), --dist loadfile,
#                   at most GPU_CHECK_SUITE_LIMIT seconds (default 400); each failure's traceback goes
#                   to tests-failures.txt as it happens; this checkout comes first on PYTHONPATH
#   --only WHAT     only the commands (commands: the default) or only the suite (suite)
#
# Exit status: 0 when every command exited as expected, 1 when one did not, 2 for bad usage, an
# existing non-empty FOLDER or no GPU (without --allow-cpu), 130 when stopped by Ctrl-C or SIGTERM (the
# commands still running are ended, and what ran is summed up).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'
}

allow_cpu=0
commands=1
suite=0
folder=""
while (($#)); do
    case "$1" in
        --allow-cpu) allow_cpu=1 ;;
        --suite) suite=1 ;;
        --only | --only=*)
            if [[ "$1" == --only=* ]]; then
                what="${1#--only=}"
            elif (($# >= 2)); then
                what="$2"
                shift
            else
                what=""
            fi
            case "$what" in
                commands) commands=1 suite=0 ;;
                suite) commands=0 suite=1 ;;
                *) echo "gpu_check.sh: --only takes commands or suite (got '${what}')" >&2; exit 2 ;;
            esac
            ;;
        -h | --help) usage; exit 0 ;;
        --) shift; folder="${1:-}"; break ;;
        -*) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *)
            if [[ -n "$folder" ]]; then
                echo "gpu_check.sh: one FOLDER only (got $folder and $1)" >&2
                exit 2
            fi
            folder="$1"
            ;;
    esac
    shift
done
folder="${folder:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
for number in GPU_CHECK_JOBS GPU_CHECK_WORKERS GPU_CHECK_SUITE_LIMIT; do
    if [[ -n "${!number:-}" && ! "${!number}" =~ ^[1-9][0-9]*$ ]]; then
        echo "gpu_check.sh: $number must be a positive whole number (got '${!number}')" >&2
        exit 2
    fi
done

# The GPUs, counted as the tests count them (tests/conftest.py: gpu_count).
gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && listing="$(nvidia-smi -L 2>/dev/null)"; then
    gpus="$(grep -c '^GPU ' <<<"$listing" || true)"
fi
if ((gpus == 0 && !allow_cpu)); then
    echo "gpu_check.sh: no NVIDIA GPU here (nvidia-smi -L lists none): nothing to check." >&2
    echo "Run it on a machine with a GPU, or with --allow-cpu to try the script itself." >&2
    exit 2
fi

placement=(placement)
if ! command -v placement >/dev/null 2>&1; then
    echo "gpu_check.sh: 'placement' is not on PATH: install it first (pip install -e '.[test]')." >&2
    exit 2
fi
if ! command -v timeout >/dev/null 2>&1; then
    echo "gpu_check.sh: 'timeout' (coreutils) is not on PATH: it limits each command's time." >&2
    exit 2
fi

if [[ -e "$folder" && -n "$(ls -A -- "$folder" 2>/dev/null)" ]]; then
    echo "gpu_check.sh: $folder exists and is not empty: give a new FOLDER (nothing is overwritten)." >&2
    exit 2
fi
mkdir -p -- "$folder"
folder="$(cd -- "$folder" && pwd)"
cd -- "$(dirname "$0")/.."  # every command runs in the repository's root (the tests, samples/)

cores="$(nproc 2>/dev/null || echo 2)"
jobs_at_once="${GPU_CHECK_JOBS:-$((cores / 4 < 2 ? 2 : cores / 4))}"
workers="${GPU_CHECK_WORKERS:-$((cores / 2 < 2 ? 2 : (cores / 2 > 8 ? 8 : cores / 2)))}"
suite_limit="${GPU_CHECK_SUITE_LIMIT:-400}"

if ((gpus >= 2)); then
    on_gpus=(--gpus "0,1")
    mirrored_on=(--gpus "0,1")
    layout="$gpus physical GPUs: towers and replicas on /gpu:0 and /gpu:1"
elif ((gpus == 1)); then
    on_gpus=(--virtual-gpus 2 --gpus "0,1")
    mirrored_on=(--virtual-gpus 2 --gpus "0,1")
    layout="one physical GPU, split into two logical GPUs (--virtual-gpus 2)"
else
    on_gpus=(--gpus "0,1" --soft)
    mirrored_on=()
    layout="no GPU (--allow-cpu): GPU requests fall back softly, mirrored on logical CPUs"
fi
# one-process commands share the GPU: each takes the memory it uses, not the whole GPU
shared=()
if ((gpus > 0)); then
    shared=(env TF_FORCE_GPU_ALLOW_GROWTH=true)
fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "layout: $layout"
    echo "runs: commands=$commands suite=$suite; $jobs_at_once commands at once; pytest -n $workers; $cores cores"
    echo "TF_ENABLE_ONEDNN_OPTS: ${TF_ENABLE_ONEDNN_OPTS-(unset)}"
    echo "TF_FORCE_GPU_ALLOW_GROWTH: ${TF_FORCE_GPU_ALLOW_GROWTH-(unset)}"
    echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
    echo "python: $(python3 --version 2>&1)"
    echo "tensorflow: $(python3 -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null || echo '?')"
    echo "placement: $("${placement[@]}" --version 2>&1 || true)"
    echo
    if ((gpus > 0)); then
        nvidia-smi 2>&1 || true
    fi
} >"$folder/machine.txt"

rows="$folder/.rows"  # a row per command, written by the command's own job; summary.tsv joins them in order
mkdir -p -- "$rows"
names=()
export COLUMNS="${COLUMNS:-160}" NO_COLOR=1

# job NAME EXPECTED LIMIT COMMAND...: the command's stdout in NAME, its stderr in NAME.err, its exit code
# and seconds in its row; past LIMIT seconds it is sent SIGTERM (then SIGKILL 20 s later): exit code 124.
# timeout runs it in a process group of its own, and ends that whole group (pytest's workers, the
# processes a cluster started); its pid is kept while it runs, for stop.
job() {
    local name="$1" expected="$2" limit="$3" code=0 began=$SECONDS pid
    shift 3
    timeout -k 20 "$limit" "$@" >"$folder/$name" 2>"$folder/$name.err" </dev/null &
    pid=$!
    echo "$pid" >"$rows/$name.pid"
    # a stop that listed the pid files before this one was written marked itself first: end it here
    [[ -e "$rows/.stopped" ]] && kill -TERM "$pid" 2>/dev/null
    wait "$pid" || code=$?
    rm -f -- "$rows/$name.pid"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$*" "$code" "$expected" "$((SECONDS - began))" >"$rows/$name"
    if [[ "$code" != "$expected" ]]; then
        echo "== $name: exit code $code (expected $expected): see $folder/$name.err"
    else
        echo "== $name: done ($((SECONDS - began)) s)"
    fi
}

# stop: Ctrl-C or SIGTERM ends every command still running (each timeout passes SIGTERM on to its
# group); what they printed and their exit codes are kept and summed up as usual, and no more start.
interrupted=0
stop() {
    interrupted=1
    : >"$rows/.stopped"  # before the pid files are listed: a job starting now sees it (job)
    local file
    for file in "$rows"/*.pid; do
        [[ -f "$file" ]] && kill -TERM "$(cat -- "$file")" 2>/dev/null || true
    done
}
trap stop INT TERM

# start NAME EXPECTED LIMIT COMMAND...: the job in the background, at most $jobs_at_once at once.
start() {
    while ((!interrupted && $(jobs -rp | wc -l) >= jobs_at_once + (suite && commands))); do
        wait -n || true
    done
    ((interrupted)) && return 0
    names+=("$1")
    echo "== $1: $(printf '%s ' "${@:4}")"
    job "$@" &
}

# both NAME EXPECTED LIMIT ARGS...: a one-process placement command as tables with TensorFlow's raw log,
# and as JSON.
both() {
    local name="$1" expected="$2" limit="$3"
    shift 3
    start "$name.txt" "$expected" "$limit" "${shared[@]}" "${placement[@]}" "$@" --log
    start "$name.json" "$expected" "$limit" "${shared[@]}" "${placement[@]}" "$@" --json
}

began=$SECONDS
if ((suite)); then
    # first, in the background: the longest run. -v prints each test's outcome as it ends (what a
    # time-out leaves), -rA every outcome again at the end.
    names+=(tests-suite.txt)
    echo "== tests-suite.txt: pytest -n $workers --dist loadfile -v -rA (at most $suite_limit s)"
    # This checkout first on PYTHONPATH (the rest kept): the suite's processes and notebook kernels then
    # import the placement under test, also where it was installed as a copy. Each failure's traceback is
    # written to tests-failures.txt as it happens (conftest), so a time-out keeps the reasons too.
    job tests-suite.txt 0 "$suite_limit" env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
        PLACEMENT_TEST_FAILURES="$folder/tests-failures.txt" \
        python3 -m pytest -n "$workers" --dist loadfile -v -rA &
fi

if ((commands)); then
    # the demo, cluster and trace --cluster: several TensorFlow processes, the environment as it is
    as_is() {
        local demo_limit=360 cluster_limit=240
        start demo.txt 0 "$demo_limit" "${placement[@]}" demo --no-pause
        start demo.json 0 "$demo_limit" "${placement[@]}" demo --no-pause --json
        start cluster.txt 0 "$cluster_limit" "${placement[@]}" cluster
        start cluster.json 0 "$cluster_limit" "${placement[@]}" cluster --json
        start trace-cluster.txt 0 "$cluster_limit" "${placement[@]}" trace --cluster worker=2 --log \
            --save-log "$folder/trace-cluster-logs" samples/multi_worker.py
        start trace-cluster.json 0 "$cluster_limit" "${placement[@]}" trace --cluster worker=2 --json \
            samples/multi_worker.py
    }
    if ((gpus < 2)); then
        as_is  # the longest first: they overlap the one-process commands
    fi
    if ((!suite)); then  # the suite runs them too
        start tests-gpu.txt 0 300 python3 -m pytest -n 0 -m gpu -rA tests
    fi
    start devices.txt 0 120 "${shared[@]}" "${placement[@]}" devices
    start devices.json 0 120 "${shared[@]}" "${placement[@]}" devices --json
    if ((gpus == 1)); then
        start devices-virtual.txt 0 120 "${shared[@]}" "${placement[@]}" devices --virtual-gpus 2
    fi
    both show 0 120 show
    both show-gpu0 "$((gpus > 0 ? 0 : 1))" 120 show --device /gpu:0 --inputs-on /cpu:0
    both tower 0 120 tower "${on_gpus[@]}" --copies
    # --time: kernels and memcpys from the GPU's own planes (CUPTI), joined with the placements
    start tower-timed.txt 0 120 "${shared[@]}" "${placement[@]}" tower "${on_gpus[@]}" --time --log
    start tower-timed.json 0 120 "${shared[@]}" "${placement[@]}" tower "${on_gpus[@]}" --time --json \
        --chrome-trace "$folder/tower-timed.trace.json"
    both train 0 180 train "${on_gpus[@]}" --copies --check
    both mirrored 0 180 mirrored "${mirrored_on[@]}" --copies
    start errors.txt 0 180 "${shared[@]}" "${placement[@]}" errors
    start errors.json 0 180 "${shared[@]}" "${placement[@]}" errors --json
    if ((gpus >= 2)); then
        while [[ -n "$(jobs -rp)" ]]; do wait || true; done  # alone at the end: a process that makes
        jobs_at_once=1                                          # devices on several GPUs reserves them whole
        as_is
    fi
fi
while [[ -n "$(jobs -rp)" ]]; do  # every job, also after a signal (which ends a plain wait early)
    wait || true
done

printf 'name\targs\texit code\texpected\tseconds\n' >"$folder/summary.tsv"
failed=0
for name in "${names[@]}"; do
    if [[ -f "$rows/$name" ]]; then
        cat -- "$rows/$name" >>"$folder/summary.tsv"
        IFS=$'\t' read -r _ _ code expected _ <"$rows/$name"
        [[ "$code" == "$expected" ]] || failed=1
    else  # never finished writing its row (the script itself was stopped)
        printf '%s\t-\t-\t-\t-\n' "$name" >>"$folder/summary.tsv"
        failed=1
    fi
done
rm -rf -- "$rows"

echo
column -t -s $'\t' "$folder/summary.tsv" 2>/dev/null || cat "$folder/summary.tsv"
echo "gpu_check.sh: $((SECONDS - began)) s"
if ((interrupted)); then
    echo "gpu_check.sh: stopped; what ran is in $folder" >&2
    exit 130
fi
if ((failed)); then
    echo "gpu_check.sh: some commands did not exit as expected; everything they printed is in $folder" >&2
    exit 1
fi
echo "gpu_check.sh: all done; outputs and TensorFlow's logs are in $folder"
