"""How compute slots are handed out (``citewise/api/slots.py``): in arrival order among
tenants with as many running, to the tenant with the fewest running first, never to more of a
tenant's requests than its lanes, and a slot lent during a provider call is taken back first."""

from __future__ import annotations

import threading
import time

import pytest

from citewise.api.slots import FairSlots


def queue_up(slots: FairSlots, tenants: list[int]) -> tuple[list[threading.Thread], list[int]]:
    """One waiting request per entry of ``tenants``, in that order; the tenants as served."""
    served: list[int] = []
    lock = threading.Lock()

    def run(tenant: int) -> None:
        assert slots.admit(tenant, timeout=10)
        with lock:
            served.append(tenant)
        slots.leave(tenant)

    threads = []
    for tenant in tenants:
        threads.append(threading.Thread(target=run, args=(tenant,)))
        threads[-1].start()
        time.sleep(0.05)  # each waits before the next comes
    return threads, served


def test_first_come_first_served_among_tenants_with_nothing_running() -> None:
    slots = FairSlots(1, 1)
    assert slots.admit(99)
    threads, served = queue_up(slots, [1, 2, 3, 4])
    slots.leave(99)
    for thread in threads:
        thread.join()
    assert served == [1, 2, 3, 4] and slots.free == 1 and not slots.lanes


@pytest.mark.heavy
def test_a_flooding_tenant_waits_behind_everyone_with_less_running() -> None:
    slots = FairSlots(2, 2)
    assert slots.admit(1) and slots.admit(1)  # the flooder holds both slots
    threads, served = queue_up(slots, [1, 1, 1, 2, 3])  # it queued first, others after
    slots.leave(1)  # a slot frees: the tenants with nothing running go first
    time.sleep(0.2)
    slots.leave(1)
    for thread in threads:
        thread.join()
    assert served[:2] == [2, 3] and served[2:] == [1, 1, 1]


def test_a_tenant_never_runs_more_than_its_lanes() -> None:
    slots = FairSlots(3, 1)
    assert slots.admit(1)
    assert not slots.admit(1, timeout=0.1)  # a slot is free, its lane is not
    assert slots.admit(2, timeout=0.1)
    slots.leave(1)
    assert slots.admit(1, timeout=0.1)


def test_a_lent_slot_is_taken_back_before_new_requests_and_the_lane_is_kept() -> None:
    slots = FairSlots(1, 1)
    assert slots.admit(1)
    slots.lend()  # a provider is waited for: the slot serves another tenant meanwhile
    assert slots.admit(2, timeout=0.1)
    assert not slots.admit(1, timeout=0.1)  # tenant 1 keeps its lane: no second request
    back = threading.Thread(target=slots.resume, args=(1,))
    back.start()
    threads, served = queue_up(slots, [3])
    slots.leave(2)
    back.join(5)
    assert not back.is_alive() and served == []  # the lent slot came back first
    slots.leave(1)
    for thread in threads:
        thread.join()
    assert served == [3] and slots.free == 1


def test_a_request_that_gives_up_leaves_the_queue() -> None:
    slots = FairSlots(1, 1)
    assert slots.admit(1)
    t = time.monotonic()
    assert not slots.admit(2, timeout=0.1)
    assert 0.09 <= time.monotonic() - t < 2
    slots.leave(1)
    assert slots.free == 1 and slots.admit(2, timeout=0)


@pytest.mark.heavy
def test_a_flooding_tenant_runs_only_on_slots_no_other_tenant_wants() -> None:
    slots = FairSlots(2, 1, flood_s=5)
    assert slots.admit(1)  # the flooder runs one ask, three more wait, a fifth is refused:
    slots.refused(1)  # flooding
    go, served = threading.Event(), []

    def flood() -> None:
        assert slots.admit(1, timeout=10)
        served.append(1)
        go.wait(10)
        slots.leave(1)

    threads = [threading.Thread(target=flood) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    assert slots.admit(2, timeout=0.1)  # a quiet tenant takes the free slot at once
    slots.leave(1)  # the flood's ask ends: its slot stays free while the quiet tenant runs
    time.sleep(0.2)
    assert served == [] and slots.free == 1
    slots.leave(2)  # no one else wants a slot: the flood goes on
    time.sleep(0.2)
    assert served == [1]
    go.set()
    for thread in threads:
        thread.join()
    assert served == [1, 1, 1] and slots.free == 2 and not slots.lanes


@pytest.mark.heavy
def test_tenants_that_merely_queue_or_were_refused_long_ago_are_not_flooding() -> None:
    slots = FairSlots(2, 1, flood_s=0.1)
    slots.refused(1)
    time.sleep(0.15)  # a refusal too long ago to count
    assert slots.admit(1) and slots.admit(2)
    threads, served = queue_up(slots, [1, 1, 3])  # waiting: a queue, not a flood
    slots.leave(1)
    time.sleep(0.1)
    slots.leave(2)  # both slots go to waiting requests, whoever else runs
    for thread in threads:
        thread.join()
    assert sorted(served) == [1, 1, 3] and slots.free == 2
