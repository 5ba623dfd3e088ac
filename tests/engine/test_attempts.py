"""Attempts (seed 001): completed-task revisit -> force_next; blocked spin on the same blockers
-> unblock_authority (escalate when auto-unblock is off, or when the loop persists after the
authority was granted); no-progress repeat -> force_next after force_next_after (5) attempts;
only attempts inside the window (1 h) count; presets change the thresholds.

Reading chosen: a pattern fires on the attempt that makes the count reach its threshold
(seed 001: "Minimum attempts (3 default)"; its blocked-spin test records 3 attempts and its
no-progress test 5), and a recovery clears the task's attempt history ("Clear attempt history").
"""

from __future__ import annotations

import pytest

from tests.engine.helpers import Action, Session, attempt, config, history_seqs, of, one, run, summary

UNBLOCK_T343 = (
    "UNBLOCK AUTHORITY GRANTED: Task T3.4.3 blocked by [critic:design_system unavailable] after 3 attempts.\n"
    "\n"
    "You have FULL AUTHORITY to:\n"
    "1. Remove or work around these blockers\n"
    "2. Make necessary architectural changes\n"
    "3. Skip unavailable dependencies temporarily\n"
    "4. Create stub implementations if needed\n"
    "5. Document blockers as technical debt for later\n"
    "\n"
    "COMPLETE the task by any means necessary, then mark it done and move on."
)


# ---- seed test 1: completed task revisit ---------------------------------------
def test_seed_1_completed_task_revisit_forces_next():
    events = [attempt("T3.4.2", "done", work=["Implemented dashboard.tsx"], agent=f"session_{i}") for i in range(4)]
    verdicts = run(events)
    assert summary(verdicts) == [("force_next", "completed_task_revisit", 3)]
    text = verdicts[0].message
    assert text.startswith("LOOP DETECTED: Task T3.4.2 completed after 3 attempts.")
    assert "DO NOT revisit this task" in text and "SELECT NEXT TASK" in text
    assert history_seqs(verdicts[0].evidence) == [1, 2, 3]


def test_near_miss_two_done_attempts():
    assert run([attempt("T3.4.2", "done") for _ in range(2)]) == []


def test_mixed_statuses_are_not_a_revisit():
    assert run([attempt("T1", "done"), attempt("T1", "in_progress", work=["x"]), attempt("T1", "done")]) == []


# ---- seed test 2: blocked task spin ----------------------------------------
def test_seed_2_blocked_spin_grants_unblock_authority_with_the_seed_text():
    blockers = ["critic:design_system unavailable"]
    verdicts = run([attempt("T3.4.3", "blocked", blockers=blockers) for _ in range(3)])
    assert summary(verdicts) == [("unblock_authority", "blocked_task_spin", 3)]
    assert verdicts[0].message == UNBLOCK_T343


def test_near_miss_two_blocked_attempts():
    assert run([attempt("T3.4.3", "blocked", blockers=["x unavailable"]) for _ in range(2)]) == []


def test_different_blockers_are_not_a_spin():
    events = [attempt("T7", "blocked", blockers=[b]) for b in ("db down", "missing auth token", "critic offline")]
    assert run(events) == []


def test_same_blockers_in_another_order_are_the_same_blockers():
    events = [attempt("T7", "blocked", blockers=["a", "b"]), attempt("T7", "blocked", blockers=["b", "a"]),
              attempt("T7", "blocked", blockers=["a", "b"])]
    assert [v.action for v in run(events)] == [Action.UNBLOCK_AUTHORITY]


def test_auto_unblock_off_escalates_to_a_human():
    cfg = config("attempts.auto_unblock=false")
    verdicts = run([attempt("T3.4.3", "blocked", blockers=["critic:design_system unavailable"])
                    for _ in range(3)], cfg)
    esc = one(verdicts, Action.ESCALATE)
    assert of(verdicts, Action.UNBLOCK_AUTHORITY) == []
    assert (esc.rule, esc.seq, esc.target) == ("blocked_task_spin", 3, "human")
    assert esc.message.startswith("ESCALATION: Loop detected on task T3.4.3 after 3 attempts.\n")
    assert "Human intervention required." in esc.message


def test_loop_persisting_after_authority_escalates_to_a_human():
    blockers = ["critic:leakage unavailable"]
    verdicts = run([attempt("T6.2.3", "blocked", blockers=blockers) for _ in range(6)])
    assert summary(verdicts) == [("unblock_authority", "blocked_task_spin", 3),
                                 ("escalate", "blocked_task_spin", 6)]
    esc = verdicts[1]
    assert esc.target == "human"
    assert esc.message == ("ESCALATION: Loop detected on task T6.2.3 after 6 attempts.\n"
                           "Human intervention required.\n"
                           "Reason: No progress despite unblock authority.")


def test_near_miss_two_more_blocked_attempts_after_authority():
    verdicts = run([attempt("T6", "blocked", blockers=["x"]) for _ in range(5)])
    assert [v.action for v in verdicts] == [Action.UNBLOCK_AUTHORITY]


# ---- seed test 3: no progress repeat ----------------------------------------
def test_seed_3_identical_work_five_times_forces_next():
    work = ["Read file A", "Parse config"]
    verdicts = run([attempt("T7.1.2", "in_progress", work=work) for _ in range(5)])
    assert summary(verdicts) == [("force_next", "no_progress_repeat", 5)]
    assert "T7.1.2" in verdicts[0].message and "DO NOT revisit this task" in verdicts[0].message


def test_near_miss_four_identical_attempts():
    assert run([attempt("T7.1.2", "in_progress", work=["Read file A", "Parse config"]) for _ in range(4)]) == []


def test_different_work_each_attempt_is_progress():
    assert run([attempt("T7.1.2", "in_progress", work=[f"step {i}"]) for i in range(8)]) == []


# ---- window and scope ------------------------------------------------------
def test_attempts_outside_the_one_hour_window_do_not_count():
    s = Session(config("limits.stall_timeout=0"))
    s.at(0.0, attempt("T1", "done"))
    s.at(1.0, attempt("T1", "done"))
    assert s.at(3602.0, attempt("T1", "done")) == []      # the first two are over an hour old


def test_attempts_inside_the_window_count():
    s = Session(config("limits.stall_timeout=0"))
    s.at(0.0, attempt("T1", "done"))
    s.at(1.0, attempt("T1", "done"))
    assert summary(s.at(3599.0, attempt("T1", "done"))) == [("force_next", "completed_task_revisit", 3)]


def test_attempts_of_other_tasks_do_not_count():
    events = [attempt("T1", "done"), attempt("T2", "done"), attempt("T1", "done"), attempt("T3", "done")]
    assert run(events) == []


# ---- presets ---------------------------------------------------------------
@pytest.mark.parametrize("preset,n,force_after,expected_blocked", [
    ("conservative", 5, 8, Action.ESCALATE),          # seed: maxAttempts 5, force next 8, no auto-unblock
    ("aggressive", 2, 3, Action.UNBLOCK_AUTHORITY),   # seed: maxAttempts 2, force next 3, auto-unblock
    ("recommended", 3, 5, Action.UNBLOCK_AUTHORITY),
])
def test_presets_change_the_thresholds(preset, n, force_after, expected_blocked):
    cfg = config(preset=preset)
    blocked = [attempt("TB", "blocked", blockers=["db down"]) for _ in range(n)]
    assert run(blocked[:-1], cfg) == []
    assert [(v.action, v.seq) for v in run([attempt("TB", "blocked", blockers=["db down"]) for _ in range(n)], cfg)] \
        == [(expected_blocked, n)]
    assert run([attempt("TD", "done") for _ in range(n - 1)], cfg) == []
    assert [(v.rule, v.seq) for v in run([attempt("TD", "done") for _ in range(n)], cfg)] == \
        [("completed_task_revisit", n)]
    same = ["same work"]
    assert run([attempt("TW", "in_progress", work=same) for _ in range(force_after - 1)], cfg) == []
    assert [(v.rule, v.seq) for v in run([attempt("TW", "in_progress", work=same) for _ in range(force_after)], cfg)] \
        == [("no_progress_repeat", force_after)]
