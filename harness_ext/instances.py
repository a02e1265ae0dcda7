"""lm-eval's requests (``Instance``) as our tasks build them and read their answers, on lm-eval 0.4.13 and 0.5.

What differs between the two lines, and is known here only:

* building a request: 0.4.13's ``Instance(request_type, doc, arguments, idx, metadata=(task, doc_id, repeats))``;
  0.5's ``Instance`` is a generic dataclass with ``task_name``, ``doc_id``, ``repeats`` and ``target`` as fields,
  and ``construct_requests`` gets ``doc_id=`` instead of ``metadata=`` (:func:`new_request`);
* lm-eval's own requests for a task's output type (``multiple_choice``, ``generate_until``): 0.4.13's
  ``ConfigurableTask.construct_requests``; on 0.5 the method of the ``Task`` subclass registered for the output type
  (:func:`default_requests`, always a list);
* the responses ``process_results`` gets: 0.4.13 passes one entry per request (its filtered responses: the first
  one under lm-eval's default ``take_first`` filter, else the list of every repeat's); 0.5 passes every request's
  filtered responses in one flat list. :func:`responses_per_request` gives back 0.4.13's shape on both.
"""

from __future__ import annotations

from typing import Any

from harness_ext.lm_eval_version import LM_EVAL_05

_CHAT_KEYS = ("apply_chat_template", "chat_template")


def _target(task: Any, doc: dict) -> Any:
    try:
        return task.doc_to_target(doc)
    except Exception:  # noqa: BLE001 - a task whose documents have no target field: the samples log None
        return None


def new_request(task: Any, request_type: str, doc: dict, arguments: tuple, idx: int = 0, *,
                repeats: int | None = None, **kwargs: Any) -> Any:
    """One request of ``task`` for ``doc``, as ``construct_requests`` returns it. ``kwargs`` are those lm-eval
    passed to ``construct_requests`` (its chat-template keys are dropped here); ``repeats`` overrides the task's
    ``repeats`` (e.g. 1 for a request answered once beside sampled ones)."""
    from lm_eval.api.instance import Instance

    for key in _CHAT_KEYS:
        kwargs.pop(key, None)
    if not LM_EVAL_05:
        task_name, doc_id, task_repeats = kwargs.pop("metadata", None) or (task.config.task, None, task.config.repeats)
        return Instance(request_type=request_type, doc=doc, arguments=arguments, idx=idx,
                        metadata=(task_name, doc_id, task_repeats if repeats is None else repeats), **kwargs)
    kwargs.pop("metadata", None)
    doc_id = kwargs.pop("doc_id")
    task_repeats = int(getattr(task.config, "repeats", None) or 1)
    return Instance(request_type, doc, arguments, task.config.task, doc_id=doc_id, idx=idx,
                    repeats=task_repeats if repeats is None else repeats, target=_target(task, doc))


def output_type_class(output_type: str | None) -> type | None:
    """lm-eval 0.5's ``Task`` subclass for an output type (``MultipleChoiceTask``, ``GenerateTask``, ...), which
    holds what 0.4.13's one ``ConfigurableTask`` did for it; None on 0.4.13 and for our own request types."""
    if not LM_EVAL_05:
        return None
    from lm_eval.api.task import Task

    return Task._registry.get(output_type or "")


def default_requests(task: Any, doc: dict, ctx: Any, **kwargs: Any) -> list:
    """lm-eval's own requests for ``doc`` under ``task``'s ``output_type`` (a list on both lines)."""
    if LM_EVAL_05:
        made = output_type_class(task.OUTPUT_TYPE).construct_requests(task, doc, ctx, **kwargs)
    else:
        from lm_eval.api.task import ConfigurableTask

        made = ConfigurableTask.construct_requests(task, doc, ctx, **kwargs)
    return list(made) if isinstance(made, (list, tuple)) else [made]


def responses_per_request(task: Any, doc: dict, results: list, take_first: bool) -> list:
    """``results`` as lm-eval 0.4.13 hands them to ``process_results``: one entry per request of ``doc``, in
    request order; each the first response (``take_first``: lm-eval's default filter) or the list of every repeat's.
    On 0.4.13 ``results`` already is that; on 0.5 it is regrouped by the doc's requests' ``repeats``."""
    if not LM_EVAL_05:
        return results
    by_doc = getattr(task, "_unlearn_requests_by_doc", None)
    if by_doc is None or by_doc[0] != len(task.instances):
        grouped: dict[int, list] = {}
        for request in task.instances:
            grouped.setdefault(id(request.doc), []).append(request)
        by_doc = (len(task.instances), {k: sorted(v, key=lambda i: i.idx) for k, v in grouped.items()})
        task._unlearn_requests_by_doc = by_doc
    requests = by_doc[1].get(id(doc), [])
    out, at = [], 0
    for request in requests:
        n = len(next(iter(request.filtered_resps.values()), request.resps)) if request.filtered_resps else 1
        chunk = results[at:at + n]
        at += n
        out.append(chunk[0] if take_first else chunk)
    return out


def standalone_request(request_type: str, arguments: tuple) -> Any:
    """A request of no task (e.g. ``unlearn judge`` asking a judge model): for a backend's ``generate_until``."""
    from lm_eval.api.instance import Instance

    if LM_EVAL_05:
        return Instance(request_type, {}, arguments, "", doc_id=0)
    return Instance(request_type=request_type, doc={}, arguments=arguments, idx=0)
