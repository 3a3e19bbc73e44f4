"""The supervisor's restart decisions: backoff that doubles and is capped, a long run that starts the count
again, and giving up after a run of fast failures (stack.restarts)."""

from __future__ import annotations

from evoskill.stack.restarts import RestartPolicy, Restarts, describe_exit

POLICY = RestartPolicy(first_delay_s=0.5, factor=2.0, max_delay_s=3.0, give_up_after=5, healthy_after_s=30.0)


def test_fast_failures_back_off_doubling_up_to_the_cap_then_give_up() -> None:
    restarts = Restarts(POLICY)
    delays = [restarts.exited(1, ran_s=2.0) for _ in range(4)]
    assert delays == [0.5, 1.0, 2.0, 3.0]  # doubling, capped at 3
    assert not restarts.gave_up
    assert restarts.exited(1, ran_s=2.0) is None  # the fifth fast failure in a row
    assert restarts.gave_up and "5 exits in a row within 30 s" in restarts.reason
    assert restarts.exited(0, ran_s=100.0) is None  # given up stays given up


def test_a_long_run_starts_the_count_again() -> None:
    restarts = Restarts(POLICY)
    for _ in range(4):
        restarts.exited(-9, ran_s=1.0)
    assert restarts.exited(-9, ran_s=31.0) == 0.5  # it was healthy: the first delay again, no give-up
    assert restarts.fast_failures == 0 and not restarts.gave_up
    assert restarts.exited(-9, ran_s=1.0) == 0.5
    assert restarts.exited(-9, ran_s=1.0) == 1.0


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(-9) == "signal 9 (SIGKILL)"
    assert describe_exit(-15) == "signal 15 (SIGTERM)"
    assert describe_exit(3) == "code 3"
    assert describe_exit(-200) == "signal 200"
    restarts = Restarts(POLICY)
    restarts.exited(-11, ran_s=1.0)
    assert restarts.last_exit == "signal 11 (SIGSEGV)"
