"""``unlearn sweep --engine ray``: every trial is a Ray task declaring the CPUs and GPUs it needs
(``resources`` of the spec); Ray places the tasks on the cluster's machines and reruns a task whose worker died
(``max_retries``). A trial of several processes is one task holding all its GPUs, so on one machine; it launches
its processes there (:func:`~unlearn_app.sweep.trial.launch_run`). Ray is an optional extra
(``pip install 'lm-eval-unlearning[ray]'``) and is imported only here.

The trials write into the sweep's folder, so every Ray node must see ``--out`` at the same path (a shared file
system), and the models and data named in the spec. Results come back to this process, which alone appends them to
``trials.jsonl`` as each task ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from unlearn_app.sweep.spec import Trial
from unlearn_app.sweep.trial import run_trial, trial_options


def run_ray(tasks: list[tuple[Trial, tuple]], resources: dict[str, Any], on_record: Callable[[dict], None],
            address: str | None = None, trial_fn: Callable[..., dict] = run_trial) -> None:
    """Submit every ``(trial, arguments of trial_fn)`` as a Ray task and record each as it finishes (``address``:
    an existing cluster such as ``auto`` or ``ray://head:10001``; none: the Ray instance already initialised in
    this process, else a new local one). ``resources``: the spec's cpus, gpus and max_retries per trial."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    task = ray.remote(num_cpus=resources["cpus"], num_gpus=resources["gpus"],
                      max_retries=int(resources["max_retries"]), retry_exceptions=False)(_call)
    options = trial_options(resources)  # processes > 1: the trial launches them on the GPUs Ray gave its task
    running: dict[Any, Trial] = {task.remote(trial_fn, *args, **options): trial for trial, args in tasks}
    try:
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                trial = running.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker died more than max_retries times
                    record = {**trial.as_dict(), "status": "failed", "error": f"{type(e).__name__}: {e}"}
                record["engine"] = "ray"
                on_record(record)
    except KeyboardInterrupt:
        for ref in running:
            ray.cancel(ref, force=True)
        raise


def _call(trial_fn: Callable[..., dict], *args: Any, **options: Any) -> dict:
    """The Ray task: one trial in a worker process."""
    return trial_fn(*args, **options)
