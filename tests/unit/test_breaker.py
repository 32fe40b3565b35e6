"""The circuit breaker's state machine (fake clock) and its thread safety."""

from __future__ import annotations

import threading

from experts.pool.breaker import BreakerPolicy, BreakerRegistry, BreakerState

POLICY = BreakerPolicy(failures=5, window_s=60.0, cooldown_s=30.0)


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _registry() -> tuple[BreakerRegistry, Clock]:
    clock = Clock()
    return BreakerRegistry(clock=clock), clock


def _trip(reg: BreakerRegistry, clock: Clock, expert: str = "python_coder") -> None:
    for i in range(POLICY.failures):
        clock.now += 1 if i else 0
        reg.record_failure(expert, POLICY, "boom")


def test_five_failures_in_the_window_open_the_breaker() -> None:
    reg, clock = _registry()
    for i in range(4):
        assert reg.record_failure("python_coder", POLICY, f"error {i}") is False
        clock.now += 10
    assert reg.admit("python_coder", POLICY).allowed
    assert reg.record_failure("python_coder", POLICY, "error 4") is True
    admission = reg.admit("python_coder", POLICY)
    assert not admission.allowed and admission.state == BreakerState.OPEN and admission.failures == 5
    snap = reg.snapshot(POLICY)["python_coder"]
    assert snap.state == BreakerState.OPEN and snap.trips == 1 and snap.failures == 5
    assert snap.opened_at is not None and snap.retry_in_s == 30.0 and snap.last_error == "error 4"
    # Other experts are not affected.
    assert reg.admit("sql_specialist", POLICY).allowed


def test_failures_older_than_the_window_expire() -> None:
    reg, clock = _registry()
    for _ in range(4):
        reg.record_failure("python_coder", POLICY)
    clock.now += 61  # the four fall out of the window
    assert reg.record_failure("python_coder", POLICY) is False
    assert reg.snapshot(POLICY)["python_coder"].failures == 1
    assert reg.admit("python_coder", POLICY).state == BreakerState.CLOSED


def test_half_open_after_cooldown_admits_exactly_one_trial_and_success_closes() -> None:
    reg, clock = _registry()
    _trip(reg, clock)
    clock.now += 29
    assert not reg.admit("python_coder", POLICY).allowed  # still cooling down
    clock.now += 1
    trial = reg.admit("python_coder", POLICY)
    assert trial.allowed and trial.trial and trial.state == BreakerState.HALF_OPEN
    for _ in range(3):  # others wait while the trial runs
        other = reg.admit("python_coder", POLICY)
        assert not other.allowed and other.state == BreakerState.HALF_OPEN
    assert reg.snapshot(POLICY)["python_coder"].trial_running
    # A non-trial success (a slot dispatched before the trip) does not close it.
    assert reg.record_success("python_coder") == BreakerState.HALF_OPEN
    assert reg.record_success("python_coder", trial=True) == BreakerState.CLOSED
    snap = reg.snapshot(POLICY)["python_coder"]
    assert snap.state == BreakerState.CLOSED and snap.failures == 0 and snap.opened_at is None and snap.trips == 1
    admission = reg.admit("python_coder", POLICY)
    assert admission.allowed and not admission.trial


def test_failed_trial_reopens_for_another_cooldown() -> None:
    reg, clock = _registry()
    _trip(reg, clock)
    clock.now += 30
    assert reg.admit("python_coder", POLICY).trial
    assert reg.record_failure("python_coder", POLICY, "still down", trial=True) is True
    snap = reg.snapshot(POLICY)["python_coder"]
    assert snap.state == BreakerState.OPEN and snap.trips == 2 and not snap.trial_running
    clock.now += 10
    assert not reg.admit("python_coder", POLICY).allowed
    clock.now += 20
    assert reg.admit("python_coder", POLICY).trial


def test_released_trial_lets_the_next_admission_try_again() -> None:
    reg, clock = _registry()
    _trip(reg, clock)
    clock.now += 30
    assert reg.admit("python_coder", POLICY).trial
    assert not reg.admit("python_coder", POLICY).allowed
    reg.release_trial("python_coder")
    assert reg.admit("python_coder", POLICY).trial


def test_stragglers_while_open_do_not_retrip_and_zero_disables() -> None:
    reg, clock = _registry()
    _trip(reg, clock)
    assert reg.record_failure("python_coder", POLICY) is False
    assert reg.snapshot(POLICY)["python_coder"].trips == 1
    off = BreakerPolicy(failures=0)
    for _ in range(20):
        assert reg.record_failure("sql_specialist", off) is False
    assert reg.admit("sql_specialist", off).allowed
    reg.reset()
    assert reg.snapshot() == {}


def test_many_threads_recording_at_once_trip_exactly_once_and_count_every_failure() -> None:
    reg = BreakerRegistry()  # the real clock: all failures fall in one window
    policy = BreakerPolicy(failures=50, window_s=3600.0, cooldown_s=3600.0)
    opened: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        for _ in range(25):
            tripped = reg.record_failure("python_coder", policy, "x")
            reg.admit("python_coder", policy)
            reg.record_success("sql_specialist")
            with lock:
                opened.append(tripped)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = reg.snapshot(policy)
    assert snap["python_coder"].failures == 16 * 25
    assert opened.count(True) == 1 and snap["python_coder"].trips == 1
    assert snap["python_coder"].state == BreakerState.OPEN
    assert snap["sql_specialist"].state == BreakerState.CLOSED


def test_concurrent_admissions_in_half_open_give_exactly_one_trial() -> None:
    reg, clock = _registry()
    _trip(reg, clock)
    clock.now += 30
    trials: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def worker() -> None:
        start.wait()
        admission = reg.admit("python_coder", POLICY)
        with lock:
            trials.append(admission.trial)

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert trials.count(True) == 1


def test_a_health_check_down_opens_at_once_and_up_closes_without_a_trial() -> None:
    reg, clock = _registry()
    key = "endpoint http://10.0.0.5:8000/v1"
    assert reg.record_health(key, POLICY, up=False, detail="ConnectError") == (BreakerState.CLOSED, BreakerState.OPEN)
    snap = reg.snapshot(POLICY)[key]
    assert snap.trips == 1 and snap.failures == 0 and snap.health == "down: ConnectError"
    assert snap.last_error == "health check: ConnectError"
    assert not reg.admit(key, POLICY).allowed
    clock.now += 20  # another failed check restarts the cooldown: no trial 30 s after the first one
    assert reg.record_health(key, POLICY, up=False, detail="ConnectError") == (BreakerState.OPEN, BreakerState.OPEN)
    clock.now += 15
    assert not reg.admit(key, POLICY).allowed and reg.snapshot(POLICY)[key].trips == 1
    assert reg.record_health(key, POLICY, up=True, detail="HTTP 200") == (BreakerState.OPEN, BreakerState.CLOSED)
    admission = reg.admit(key, POLICY)
    assert admission.allowed and not admission.trial and reg.snapshot(POLICY)[key].health == "up: HTTP 200"


def test_a_health_check_with_breaking_off_is_only_recorded() -> None:
    reg, _ = _registry()
    off = BreakerPolicy(failures=0)
    assert reg.record_health("endpoint x", off, up=False, detail="down") == (BreakerState.CLOSED, BreakerState.CLOSED)
    assert reg.admit("endpoint x", off).allowed and reg.snapshot(off)["endpoint x"].health == "down: down"
