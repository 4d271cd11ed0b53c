"""The stack as a person uses it, in a real browser (slow).

Debian's Chromium (``apt-get install -y chromium``; never ``playwright install``) driven by Playwright:
with the stack up (``stack`` fixture, ``conftest.py``), open the Prefect UI, go to the ``retrain-nightly``
deployment, start a custom run from its form with non-default parameters (learners LR and NB only, seed 3,
3 CV folds, own experiment and registered model), wait in the UI until the flow run is Completed, then
open the MLflow UI, switch it to "Model training" and find the run's parent run with one nested run per
candidate: the learners, plus ``<learner>+<weighting>`` when the parent's tag ``shiftflow.weighting`` (the
flow's ``weighting=auto`` resolves to ``kmm`` when the drift stage finds drift) is not ``none``.

Screenshots go to a temp folder and, when ``SHIFTFLOW_SCREENSHOTS`` names a folder, are copied there.
Stage times are printed (``-s`` shows them).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flows.stack import PREFECT_WORKER
from tests.flows.conftest import copy_screenshots, prefect_rest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]  # STACK_NOTES
UI_TIMEOUT_MS = 120_000  # one page of either UI has taken ~10 s to render on a loaded 2-core box
RUN_TIMEOUT_S = 900  # submit → Completed: seen ~60 s; 70–150 s for one run of the flow under load
LEARNERS = ["LR", "NB"]
SEED, CV_FOLDS = 3, 3
EXPERIMENT = "browser-e2e"
MODEL_NAME = "shiftflow-browser-e2e"  # not the deployment's default registered model: other tests share it
TERMINAL = {"Completed", "Failed", "Crashed", "Cancelled"}


def _field(page: Any, label: str) -> Any:
    """One property of Prefect's schema form, by its label (innermost ``.schema-form-property``)."""
    return page.locator(
        "xpath=//div[contains(concat(' ', normalize-space(@class), ' '), ' schema-form-property ')]"
        "[div[contains(@class, 'p-label__header')]//span[contains(@class, 'schema-form-property__label')"
        f" and normalize-space() = '{label}']]"
    )


def _set_learners(page: Any, wanted: list[str]) -> None:
    """Keep exactly ``wanted`` in the Learners multi-select (its tags have a dismiss button each; the list
    re-renders after each click, so dismiss one at a time and wait for it to go)."""
    learners = _field(page, "Learners (Optional)")
    tags = learners.locator(".p-tag")

    def present() -> list[str]:
        return [t.strip() for t in tags.all_inner_texts()]

    assert set(wanted) <= set(present()), f"Learners shows {present()}; the form should prefill the deployment's"
    deadline = time.monotonic() + 60
    while (extra := [n for n in present() if n not in wanted]) and time.monotonic() < deadline:
        n_before = len(present())
        learners.locator(".p-tag", has_text=re.compile(rf"^\s*{re.escape(extra[0])}\s*$")).locator(
            "button.p-tag__dismiss").click()
        while len(present()) == n_before and time.monotonic() < deadline:
            page.wait_for_timeout(100)
    assert sorted(present()) == sorted(wanted), present()


def _submit(page: Any, notes: list[str], tries: int = 5) -> None:
    """Click the custom-run form's Submit until the page leaves the form.

    Prefect 3.9's sqlite server can answer the create call with 503 (a locked database; see
    ``tests.flows.conftest.prefect_rest``), which the form shows as a new "Oops. Something went wrong." toast and
    stays: a user clicks again. Only a new such toast is retried, so an accepted submission is never sent twice."""
    oops = page.get_by_text("Something went wrong", exact=False)
    for attempt in range(1, tries + 1):
        shown = oops.count()  # toasts already on the page are not this click's answer
        page.get_by_role("button", name="Submit", exact=True).click()
        deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
        while not (failed := oops.count() > shown) and re.search(r"/run(\?|$)", page.url):
            if time.monotonic() > deadline:
                raise AssertionError(f"Submit: the form stayed at {page.url} with no error shown")
            page.wait_for_timeout(500)
        if not failed:
            return
        notes.append(f"Submit {attempt}: the UI showed 'Something went wrong' (the server's 503); submitted again")
        page.wait_for_timeout(2000 * attempt)
    raise AssertionError(f"Submit failed {tries} times with 'Something went wrong'")


def _flow_run_state(page: Any) -> str:
    return page.locator(".page-heading-flow-run .state-badge").first.inner_text().strip()


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start) + len(start)
    return text[i:text.index(end, i)]


def require_chromium() -> None:
    """Skip (fail on CI) without Playwright or Debian's Chromium: before a test starts any work."""
    pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        msg = f"{CHROMIUM} missing: apt-get install -y chromium (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@contextmanager
def browser_page(tmp_path: Path, tag: str, *, failure_shot: str) -> Iterator[tuple[Any, Any, dict[str, float],
                                                                                    list[str]]]:
    """One Chromium page (Playwright, ``executable_path``; the UIs' slow first renders as timeouts); yields
    (page, shot(page, name, **screenshot_kw), times, notes). A failure takes a full-page screenshot; at the end
    the screenshots are copied to ``$SHIFTFLOW_SCREENSHOTS`` (when set) and the times and notes printed."""
    from playwright import sync_api

    shots_dir = tmp_path / "screenshots"
    shots_dir.mkdir()
    shots: list[Path] = []
    times: dict[str, float] = {}
    notes: list[str] = []

    def shot(page: Any, name: str, **kw: Any) -> None:
        path = shots_dir / f"{name}.png"
        page.screenshot(path=str(path), **kw)
        shots.append(path)

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.set_default_navigation_timeout(UI_TIMEOUT_MS)
        try:
            yield page, shot, times, notes
        except Exception:
            try:
                shot(page, failure_shot, full_page=True)
            except Exception:  # noqa: BLE001 - keep the original error
                pass
            raise
        finally:
            browser.close()
            copied = copy_screenshots(shots, os.environ.get("SHIFTFLOW_SCREENSHOTS"))
            print(f"\n[{tag}] screenshots: {shots_dir}" + (f" (copied to {copied[0].parent})" if copied else ""))
            for k, v in times.items():
                print(f"[{tag}] {k}: {v:.1f} s")
            for n in notes:
                print(f"[{tag}] note: {n}")


@pytest.mark.slow
def test_custom_run_from_prefect_ui_shows_nested_runs_in_mlflow_ui(stack: dict[str, Any], tmp_path: Path) -> None:
    require_chromium()
    from mlflow.tracking import MlflowClient
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    times0 = {"up → both UIs answering (HTTP)": stack["ui_seconds"]}
    with browser_page(tmp_path, "browser", failure_shot="99-failure") as (page, shot, times, notes):
        times.update(times0)
        # ---- Prefect UI: Deployments → retrain-nightly → Run → Custom run
        t0 = time.monotonic()
        page.goto(f"{stack['prefect_url']}/deployments", wait_until="load")
        page.get_by_role("link", name="retrain-nightly", exact=True).first.click()
        page.wait_for_url("**/deployments/deployment/**")
        page.get_by_role("button", name="Run", exact=True).wait_for()
        times["Prefect UI: deployments → retrain-nightly page"] = time.monotonic() - t0
        shot(page, "01-prefect-deployment")

        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_text("Custom run", exact=True).click()
        page.wait_for_url(re.compile(r"/deployments/deployment/[^/]+/run"))
        _field(page, "Learners (Optional)").wait_for()
        _set_learners(page, LEARNERS)
        _field(page, "Seed (Optional)").locator("input").fill(str(SEED))
        _field(page, "Cv Folds (Optional)").locator("input").fill(str(CV_FOLDS))
        _field(page, "Experiment (Optional)").locator("textarea").fill(EXPERIMENT)
        model = _field(page, "Model Name (Optional)")
        model.get_by_role("button", name="str", exact=True).click()
        model.locator("textarea, input").first.fill(MODEL_NAME)
        # prefect.yaml sets simulate_bias "auto" (the embedded example keeps RT's bias): the form shows that
        # choice, not a BiasSpec; should a Prefect version still render an empty BiasSpec, whose required
        # Mechanism blocks Submit, enter the example's mechanism (count() looks without waiting)
        mechanism = _field(page, "Mechanism").locator("textarea, input")
        if mechanism.count() and not mechanism.first.input_value():
            mechanism.first.fill("rt_sort")
            notes.append("the custom-run form showed simulate_bias as a BiasSpec with an empty (required) "
                         "Mechanism; filled 'rt_sort' (the embedded example's mechanism)")
        run_name = page.locator(".flow-run-name-input input").input_value()
        assert run_name, "the form proposes no run name"
        _field(page, "Learners (Optional)").scroll_into_view_if_needed()
        shot(page, "02-prefect-custom-run-form")

        t_submit = time.monotonic()
        _submit(page, notes)
        if "/runs/flow-run/" not in page.url:  # Prefect 3.9's form returns to the deployment's Runs tab
            link = page.get_by_role("link", name=run_name, exact=True).first
            for _ in range(6):
                try:
                    link.wait_for(timeout=20_000)
                    break
                except PlaywrightTimeout:
                    page.reload(wait_until="load")
            link.click()
            page.wait_for_url("**/runs/flow-run/**")
        flow_run_id = page.url.split("/runs/flow-run/")[1].split("?")[0].split("/")[0]

        # ---- wait in the UI until the flow run is finished (the page refreshes its state itself)
        deadline = t_submit + RUN_TIMEOUT_S
        last_reload = time.monotonic()
        state = _flow_run_state(page)
        while state not in TERMINAL and time.monotonic() < deadline:
            page.wait_for_timeout(3000)
            if time.monotonic() - last_reload > 60:
                page.reload(wait_until="load")
                page.locator(".page-heading-flow-run .state-badge").first.wait_for()
                last_reload = time.monotonic()
            state = _flow_run_state(page)
        times["UI-triggered run: Submit → 'Completed' in the UI"] = time.monotonic() - t_submit
        shot(page, "03-prefect-flow-run-completed")
        with prefect_rest(stack["prefect_api"]) as client:
            fr = client.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()
        worker_log = Path(stack["record"]["services"][PREFECT_WORKER]["log"])
        assert state == "Completed", (
            f"flow run {run_name} ({flow_run_id}) shows {state!r} in the UI (API: {fr['state']['type']}: "
            f"{fr['state'].get('message')})\nworker log tail:\n{worker_log.read_text()[-3000:]}")
        cfg = fr["parameters"]["config"]
        assert sorted(cfg["learners"]) == sorted(LEARNERS) and cfg["seed"] == SEED, cfg  # what the form sent
        assert cfg["cv_folds"] == CV_FOLDS and cfg["experiment"] == EXPERIMENT, cfg
        if fr.get("start_time") and fr.get("end_time"):
            times["flow run on the worker (API: start → end)"] = fr["total_run_time"]

        # ---- MLflow UI: Model training → experiment → parent run and its nested runs
        t0 = time.monotonic()
        page.goto(f"{stack['mlflow']}/", wait_until="load")
        page.get_by_text("Model training", exact=True).first.wait_for()
        times["MLflow UI: home page rendered"] = time.monotonic() - t0
        page.get_by_text("Model training", exact=True).first.click()
        page.get_by_role("link", name=EXPERIMENT, exact=True).first.click()
        name_cells = page.locator('[role=gridcell][col-id="attributes.`Run Name`"]')
        parent_name = f"retrain-{run_name}"
        parent_cell = name_cells.filter(has_text=parent_name)
        parent_cell.wait_for()
        parent_cell.locator("button").first.click()  # expand the nested runs
        deadline = time.monotonic() + 60
        while name_cells.count() < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(500)
        table_names = [n.strip() for n in name_cells.locator("a").all_inner_texts()]
        shot(page, "04-mlflow-runs-nested")

        parent_cell.locator("a").first.click()
        page.get_by_text("shiftflow.weighting", exact=True).wait_for()
        page.get_by_text("Child runs", exact=True).wait_for()
        deadline = time.monotonic() + 60
        body = page.inner_text("body")
        while "loading" in _between(body, "Child runs", "\nSource").lower() and time.monotonic() < deadline:
            page.wait_for_timeout(500)  # the child-run list loads after the rest of the page
            body = page.inner_text("body")
        shot(page, "05-mlflow-parent-run")
        times["MLflow UI: home → parent run page"] = time.monotonic() - t0

    # what the parent run records, as the MLflow UI shows it
    weighting = re.search(r"shiftflow\.weighting\s*:\s*(\S+)", body)
    assert weighting, f"no shiftflow.weighting tag on the parent run page:\n{body[-2000:]}"
    weighting = weighting.group(1)
    learners_param = re.search(r"\nlearners\n(\[.*?\])\n", body)
    assert learners_param, "no learners parameter on the parent run page"
    recorded = json.loads(learners_param.group(1).replace("'", '"'))
    assert sorted(recorded) == sorted(LEARNERS)
    expected = sorted(recorded + ([f"{n}+{weighting}" for n in recorded] if weighting != "none" else []))
    children = sorted(c.strip() for c in _between(body, "Child runs\n", "\nSource").split(",") if c.strip())
    assert children == expected, f"parent run page lists child runs {children}, expected {expected}"
    assert table_names[0] == parent_name and sorted(table_names[1:]) == expected, table_names

    # the same through the tracking API (the UI showed the right thing, not just something)
    ml = MlflowClient(stack["mlflow"])
    exp = ml.get_experiment_by_name(EXPERIMENT)
    runs = ml.search_runs([exp.experiment_id], filter_string=f"tags.`prefect.flow_run_id` = '{flow_run_id}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and parents[0].info.run_name == parent_name
    assert parents[0].data.tags["shiftflow.weighting"] == weighting
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(r.info.run_name for r in nested) == expected
    print(f"[browser] flow run {run_name}: weighting {weighting}, nested runs {expected}")
