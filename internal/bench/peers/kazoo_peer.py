"""kazoo_peer runs one benchmark scenario of zkrecipes' runner
(internal/bench) with kazoo's recipes, in one process with one KazooClient
session per participant, and reports to the runner over stdin/stdout with
the line protocol described in README.md next to this file:

    peer: "ready"        sessions open (and, when cycling, warmed up)
    run:  "go"           start measuring
    peer: {...}          one line of JSON: the result
    run:  EOF on stdin   close the sessions and exit

A peer that stalls (no cycle completes for -stall-ms) or runs out of time
(-deadline-ms, the lost-reply run) prints its result with status "stalled"
or "timeout" at once and exits without closing its sessions.

    python3 kazoo_peer.py -zk 127.0.0.1:2181 -path /x -scenario mutex -sessions 8
"""

import json
import logging
import os
import queue
import random
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, ReadLock, Semaphore, WriteLock


def parse_flags(argv):
    flags = {}
    if len(argv) % 2:
        raise SystemExit("flags come in pairs: -name value")
    for name, value in zip(argv[::2], argv[1::2]):
        if not name.startswith("-"):
            raise SystemExit("flag expected: " + name)
        flags[name[1:]] = value
    return flags


class Peer:
    def __init__(self, flags):
        self.flags = flags
        self.zk = flags["zk"]
        self.path = flags["path"]
        self.session_timeout = int(flags.get("session-timeout-ms", "10000")) / 1000
        self.stall = int(flags.get("stall-ms", "5000")) / 1e3
        self.progress = 0
        self.progress_lock = threading.Lock()
        self.failure = None
        self.clients = []
        self.phase = 0  # 0 warm-up, 1 measure, 2 stop
        self.extra = {}  # more fields of the result line

    def num(self, name, default):
        return int(self.flags.get(name, str(default)))

    def run(self):
        scenario = self.flags["scenario"]
        sessions = self.num("sessions", 1)
        if scenario == "mutex":
            self.cycling(sessions, lambda i: self.mutex(self.connect()))
        elif scenario == "semaphore":
            leases = self.num("leases", 3)
            self.cycling(sessions, lambda i: self.semaphore(self.connect(), leases))
        elif scenario == "rwlock":
            reads = float(self.flags.get("reads", "0.9"))
            self.cycling(sessions, lambda i: self.rwlock(self.connect(), reads, i))
        elif scenario == "queue":
            self.queue(sessions, self.num("waiters", 10))
        elif scenario == "lost-reply":
            self.lost_reply(sessions, self.num("cycles", 50))
        elif scenario in ("leader-resign", "leader-close"):
            self.handoff(sessions, self.num("handoffs", 20), scenario == "leader-close")
        else:
            raise SystemExit("unknown -scenario " + scenario)
        # The runner counts what is left on the server before we close.
        for _ in sys.stdin:
            pass
        for c in self.clients:
            c.stop()
            c.close()
        sys.exit(0)

    def connect(self):
        c = KazooClient(hosts=self.zk, timeout=self.session_timeout)
        c.start(timeout=15)
        self.clients.append(c)
        return c

    def mutex(self, c):
        lock = Lock(c, self.path)
        return lock.acquire, lock.release

    def semaphore(self, c, leases):
        sem = Semaphore(c, self.path, max_leases=leases)
        return sem.acquire, sem.release

    def rwlock(self, c, reads, seed):
        rlock, wlock = ReadLock(c, self.path), WriteLock(c, self.path)
        rng = random.Random(seed)
        held = [None]

        def lock():
            held[0] = rlock if rng.random() < reads else wlock
            held[0].acquire()

        return lock, lambda: held[0].release()

    def tick(self):
        with self.progress_lock:
            self.progress += 1

    def ready(self):
        print("ready", flush=True)
        line = sys.stdin.readline().strip()
        if line != "go":
            raise SystemExit('expected "go", got %r' % line)

    def cycling(self, sessions, opener):
        lockers = [opener(i) for i in range(sessions)]
        lat = [[] for _ in range(sessions)]

        def loop(i):
            lock, unlock = lockers[i]
            try:
                while True:
                    p = self.phase
                    if p == 2:
                        return
                    t0 = time.monotonic_ns()
                    lock()
                    d = time.monotonic_ns() - t0
                    unlock()
                    if sessions == 1:
                        d = time.monotonic_ns() - t0
                    self.tick()
                    if p == 1:
                        lat[i].append(d)
            except Exception as e:  # reported to the runner
                self.failure = repr(e)

        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(sessions)]
        for t in threads:
            t.start()
        self.wait(self.num("warmup-ms", 500) / 1e3)
        self.ready()
        start = time.monotonic_ns()
        self.phase = 1
        self.wait(self.num("duration-ms", 2000) / 1e3)
        elapsed = time.monotonic_ns() - start
        self.phase = 2
        self.join(threads, lambda status: self.finish(sum(lat, []), elapsed, status=status, halt=True))
        self.check_failure()
        self.finish(sum(lat, []), elapsed)

    def wait(self, seconds):
        """Sleeps, ending the run when cycling stalls or fails."""
        end = time.monotonic() + seconds
        last, since = self.progress, time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.02)
            self.check_failure()
            if self.progress != last:
                last, since = self.progress, time.monotonic()
            elif time.monotonic() - since > self.stall:
                self.finish([], 0, status="stalled", halt=True)

    def join(self, threads, give_up, deadline=None):
        last, since = self.progress, time.monotonic()
        for t in threads:
            while t.is_alive():
                t.join(0.05)
                now = time.monotonic()
                if self.progress != last:
                    last, since = self.progress, now
                if deadline is not None and now > deadline:
                    give_up("timeout")
                elif now - since > self.stall:
                    give_up("stalled")

    def check_failure(self):
        if self.failure is not None:
            self.finish([], 0, status="error", error=self.failure, halt=True)

    def lost_reply(self, sessions, cycles):
        lockers = [self.mutex(self.connect()) for _ in range(sessions)]
        self.ready()
        deadline = time.monotonic() + self.num("deadline-ms", 30000) / 1e3
        hold = self.num("hold-ms", 1) / 1e3
        errors = [0]
        lat, held = [], []
        guard = threading.Lock()
        start = time.monotonic_ns()

        def loop(lock, unlock):
            for _ in range(cycles):
                t0 = time.monotonic_ns()
                try:
                    lock()
                except Exception:
                    with guard:
                        errors[0] += 1
                    continue
                frm = time.monotonic_ns()
                time.sleep(hold)
                to = time.monotonic_ns()
                try:
                    unlock()
                except Exception:
                    with guard:
                        errors[0] += 1
                with guard:
                    lat.append(time.monotonic_ns() - t0)
                    held.append([frm, to])
                self.tick()

        threads = [threading.Thread(target=loop, args=l, daemon=True) for l in lockers]
        for t in threads:
            t.start()

        def give_up(status):
            with guard:
                self.finish(list(lat), time.monotonic_ns() - start, errors[0], list(held), status, halt=True)

        self.join(threads, give_up, deadline)
        self.finish(lat, time.monotonic_ns() - start, errors[0], held)

    def queue(self, sessions, waiters):
        """A queue drain: waiters threads, each with a Lock of its own on
        session i mod sessions, queue on one lock behind a holder (on the
        first session). The runner watches the lock's children and says
        "measure" once all are queued ("started" first); Python's heap is
        not measured. On "go" the holder releases; each waiter releases as
        soon as it holds. The result has the times the holder's release was
        called and returned (release_ns) and, per waiter, the times its
        acquire and release returned (held_ns)."""
        clients = [self.connect() for _ in range(sessions)]
        self.warm_drains(clients, self.num("warmup-ms", 0) / 1e3)
        holder = Lock(clients[0], self.path)
        holder.acquire()
        held = [None] * waiters
        errors = [0]
        guard = threading.Lock()

        def waiter(i):
            try:
                lock = Lock(clients[i % sessions], self.path)
                lock.acquire()
                locked = time.monotonic_ns()
                lock.release()
                held[i] = [locked, time.monotonic_ns()]
            except Exception as e:  # reported to the runner
                with guard:
                    errors[0] += 1
                    if self.failure is None:
                        self.failure = repr(e)
            self.tick()

        threads = [threading.Thread(target=waiter, args=(i,), daemon=True) for i in range(waiters)]
        for t in threads:
            t.start()
        print("started", flush=True)
        line = sys.stdin.readline().strip()
        if line != "measure":
            raise SystemExit('expected "measure", got %r' % line)
        self.ready()
        deadline = time.monotonic() + self.num("deadline-ms", 60000) / 1e3
        r0 = time.monotonic_ns()
        holder.release()
        r1 = time.monotonic_ns()
        self.extra = {"release_ns": [r0, r1]}
        self.join(threads, lambda status: self.finish([], time.monotonic_ns() - r0, errors[0], status=status, halt=True), deadline)
        done = [h for h in held if h is not None]
        end = max([r1] + [h[1] for h in done])
        self.finish([], end - r0, errors[0], done, error=self.failure)

    def warm_drains(self, clients, seconds):
        """Drains of 10 threads (acquire, release) on the lock for seconds,
        unmeasured, as the Curator peer does before its measured drain."""

        def waiter(client):
            try:
                lock = Lock(client, self.path)
                lock.acquire()
                lock.release()
            except Exception as e:  # reported to the runner
                self.failure = repr(e)

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            threads = [threading.Thread(target=waiter, args=(clients[i % len(clients)],), daemon=True)
                       for i in range(10)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(self.stall)
                if t.is_alive():
                    self.finish([], 0, status="stalled", error="warm-up drain", halt=True)
            self.check_failure()

    def handoff(self, sessions, handoffs, close_client):
        """Time from a leader's resign (its Election.run function returns)
        or close (KazooClient.stop) to the next leader's function being
        called, over handoffs hand-offs among sessions participants; the
        one that left joins again at the back (close: on a new session).
        Two unmeasured hand-offs come first."""
        elected = queue.Queue()
        resign = {}

        def participant(i, client):
            election = Election(client, self.path, "peer-%d" % i)

            def lead():
                ev = threading.Event()
                resign[i] = ev
                elected.put((i, time.monotonic_ns()))
                ev.wait()

            while client.connected:
                try:
                    election.run(lead)
                except Exception:
                    return

        def join(i):
            threading.Thread(target=participant, args=(i, self.connect()), daemon=True).start()

        clients = {}
        for i in range(sessions):
            join(i)
            clients[i] = self.clients[-1]
        self.ready()
        lat = []
        start = time.monotonic_ns()

        def poll():
            try:
                return elected.get(timeout=self.stall)
            except queue.Empty:
                self.finish(lat, time.monotonic_ns() - start, status="stalled", halt=True)

        cur, _ = poll()
        warm = 2
        for h in range(handoffs + warm):
            t0 = time.monotonic_ns()
            if close_client:
                c = clients[cur]
                c.stop()
                resign[cur].set()
                c.close()
                self.clients.remove(c)
                join(cur)
                clients[cur] = self.clients[-1]
            else:
                resign[cur].set()
            nxt, t1 = poll()
            if h >= warm:
                lat.append(t1 - t0)
            cur = nxt
        self.finish(lat, time.monotonic_ns() - start)

    def finish(self, lat, elapsed_ns, errors=0, held=None, status="ok", error=None, halt=False):
        out = {"status": status, "elapsed_ns": elapsed_ns, "errors": errors,
               "completed": self.progress, "lat_ns": lat}
        if error is not None:
            out["error"] = error
        if held is not None:
            out["held_ns"] = held
        out.update(self.extra)
        sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        if halt:
            os._exit(0)


def main():
    logging.basicConfig(level=logging.CRITICAL)
    Peer(parse_flags(sys.argv[1:])).run()


if __name__ == "__main__":
    main()
