"""A kazoo client that the interop tests drive over stdin, one command a line.

It answers each command with one line on stdout. It is started as

    /usr/bin/python3 -u kazoo_contender.py SERVERS ID LOGFILE

connects to SERVERS with ID as its nodes' data, then prints "ready".
Commands (PATH is a lock directory; PATTERN... are kazoo's
extra_lock_patterns, none for kazoo's own names only):

    hold PATH [PATTERN...]        Lock.acquire(), append "enter ID mutex" to
                                  LOGFILE, print "held"
    try PATH [PATTERN...]         Lock.acquire(blocking=False): as hold when
                                  it got the lock, else print "busy"
    release                       append "exit ID KIND" to LOGFILE (for a
                                  lock), release, print "released"
    loop PATH N MS [PATTERN...]   N times: acquire, log enter, sleep MS, log
                                  exit, release; print "looped"
    rlock PATH                    ReadLock.acquire(), print "held"
    elect PATH                    Election.run() until release; print
                                  "leading" once elected
    quit                          close the client and exit

A failed command prints "error " and the reason.
"""

import sys
import threading
import time

from kazoo.client import KazooClient


class Contender:
    def __init__(self, servers, ident, log_path):
        self.ident = ident
        # Unbuffered and opened for appending: one write(2) per line, with
        # O_APPEND, like the Go and Java contenders.
        self.log = open(log_path, "ab", buffering=0)
        self.client = KazooClient(hosts=servers, timeout=10.0)
        self.held = None  # (release function, kind logged or None)

    def note(self, what, kind):
        self.log.write(("%s %s %s\n" % (what, self.ident, kind)).encode())

    def lock(self, path, patterns):
        return self.client.Lock(path, self.ident, extra_lock_patterns=patterns)

    def hold(self, path, *patterns):
        lk = self.lock(path, patterns)
        lk.acquire()
        self.held = (lk.release, "mutex")
        self.note("enter", "mutex")
        return "held"

    def try_(self, path, *patterns):
        lk = self.lock(path, patterns)
        if not lk.acquire(blocking=False):
            return "busy"
        self.held = (lk.release, "mutex")
        self.note("enter", "mutex")
        return "held"

    def release(self):
        release, kind = self.held
        if kind:
            self.note("exit", kind)
        release()
        self.held = None
        return "released"

    def loop(self, path, n, ms, *patterns):
        lk = self.lock(path, patterns)
        for _ in range(int(n)):
            lk.acquire()
            self.note("enter", "mutex")
            time.sleep(int(ms) / 1000.0)
            self.note("exit", "mutex")
            lk.release()
        return "looped"

    def rlock(self, path):
        lk = self.client.ReadLock(path, self.ident)
        lk.acquire()
        self.held = (lk.release, None)
        return "held"

    def elect(self, path):
        election = self.client.Election(path, self.ident)
        elected, resign = threading.Event(), threading.Event()

        def lead():
            elected.set()
            resign.wait()

        runner = threading.Thread(target=election.run, args=(lead,), daemon=True)
        runner.start()
        if not elected.wait(30):
            election.cancel()
            raise RuntimeError("not elected within 30 s")

        def release():
            resign.set()
            runner.join(10)

        self.held = (release, None)
        return "leading"


def main():
    servers, ident, log_path = sys.argv[1:4]
    c = Contender(servers, ident, log_path)
    c.client.start(timeout=30)
    commands = {"hold": c.hold, "try": c.try_, "release": c.release,
                "loop": c.loop, "rlock": c.rlock, "elect": c.elect}
    print("ready", flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "quit":
            break
        try:
            print(commands[f[0]](*f[1:]), flush=True)
        except Exception as e:  # the test reads the reason
            print("error %r" % (e,), flush=True)
    c.client.stop()
    c.client.close()


if __name__ == "__main__":
    main()
