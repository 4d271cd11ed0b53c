"""tasks.logs: ``run_logger`` is Prefect's run logger, bound to the flow or task run whose context is active, inside
a run, and the plain ``shiftflow`` logger outside one (a task's ``.fn`` called directly, a script, a test)."""

from __future__ import annotations

import logging
import uuid

import pytest
from prefect import flow, task
from prefect.client.schemas.objects import FlowRun, TaskRun
from prefect.context import FlowRunContext, TaskRunContext

from tasks.logs import run_logger


@flow(name="a-flow")
def _a_flow():
    return None


@task(name="a-task")
def _a_task():
    return None


def _contexts():
    """The flow-run and task-run contexts Prefect's engine enters around a run, built here without an API (only the
    fields the run logger reads: the run and its flow or task)."""
    fr = FlowRun(id=uuid.uuid4(), name="flow-run-name", flow_id=uuid.uuid4())
    tr = TaskRun(id=uuid.uuid4(), name="task-run-name", flow_run_id=fr.id, task_key="a-task", dynamic_key="0")
    return (fr, FlowRunContext.model_construct(flow=_a_flow, flow_run=fr),
            tr, TaskRunContext.model_construct(task=_a_task, task_run=tr))


def test_outside_a_run_it_is_the_shiftflow_logger(caplog):
    log = run_logger()
    assert log is logging.getLogger("shiftflow")
    with caplog.at_level(logging.INFO, logger="shiftflow"):
        log.info("drift: %s", "no drift")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("shiftflow", "drift: no drift")]


def test_inside_a_flow_run_and_a_task_run_it_is_prefects_logger_for_that_run():
    fr, flow_ctx, tr, task_ctx = _contexts()
    with flow_ctx:
        in_flow = run_logger()
        with task_ctx:
            in_task = run_logger()
        after_task = run_logger()
    assert isinstance(in_flow, logging.LoggerAdapter) and in_flow.logger.name == "prefect.flow_runs"
    assert (in_flow.extra["flow_run_id"], in_flow.extra["flow_name"]) == (str(fr.id), "a-flow")
    assert isinstance(in_task, logging.LoggerAdapter) and in_task.logger.name == "prefect.task_runs"
    assert (in_task.extra["task_run_id"], in_task.extra["flow_run_id"], in_task.extra["task_name"]) == \
        (str(tr.id), str(fr.id), "a-task")
    assert after_task.logger.name == "prefect.flow_runs"  # the flow's again once the task's context is left
    assert run_logger() is logging.getLogger("shiftflow")  # and the plain logger once the flow's is left


@pytest.mark.slow  # a real flow run needs the session's Prefect API (prefect_harness: 6 to 30 s to start alone)
def test_in_a_real_flow_run_it_is_bound_to_that_run(prefect_harness):
    @task
    def in_task():
        return run_logger(), str(TaskRunContext.get().task_run.id)

    @flow
    def in_flow():
        return run_logger(), str(FlowRunContext.get().flow_run.id), in_task()

    flow_log, flow_run_id, (task_log, task_run_id) = in_flow()
    assert flow_log.logger.name == "prefect.flow_runs" and flow_log.extra["flow_run_id"] == flow_run_id
    assert task_log.logger.name == "prefect.task_runs"
    assert (task_log.extra["task_run_id"], task_log.extra["flow_run_id"]) == (task_run_id, flow_run_id)
