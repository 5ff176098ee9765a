// CuratorPeer runs one benchmark scenario of zkrecipes' runner
// (internal/bench) with Apache Curator's recipes, in one process with one
// CuratorFramework session per participant, and reports to the runner over
// stdin/stdout with the line protocol described in peers/README.md:
//
//   peer: "ready"            sessions open (and, when cycling, warmed up)
//   run:  "go"               start measuring
//   peer: {...}              one line of JSON: the result
//   run:  EOF on stdin       close the sessions and exit
//
// A peer that stalls (no cycle completes for -stall-ms) or runs out of time
// (-deadline-ms, the lost-reply run) prints its result with status "stalled"
// or "timeout" at once and exits without closing its sessions.
//
// Compile and run (the runner does both):
//   javac -cp CP -d OUT CuratorPeer.java
//   java -cp OUT:CP CuratorPeer -zk 127.0.0.1:2181 -path /x -scenario mutex -sessions 8
// where CP lists curator-{recipes,framework,client}, guava, zookeeper,
// zookeeper-jute and slf4j jars from /usr/share/java.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorPeer {
    /** One participant's handle: lock() waits, unlock() releases what lock() took. */
    interface Locker {
        void lock() throws Exception;

        void unlock() throws Exception;
    }

    private final Map<String, String> flags;
    private final String zk;
    private final String path;
    private final int sessionTimeoutMs;
    private final long stallNs;
    private final BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    private final AtomicLong progress = new AtomicLong();
    private final List<CuratorFramework> clients = new ArrayList<>();

    private CuratorPeer(Map<String, String> flags) {
        this.flags = flags;
        this.zk = str("zk", null);
        this.path = str("path", null);
        this.sessionTimeoutMs = num("session-timeout-ms", 10000);
        this.stallNs = TimeUnit.MILLISECONDS.toNanos(num("stall-ms", 5000));
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("-")) {
                throw new IllegalArgumentException("flag expected: " + args[i]);
            }
            flags.put(args[i].substring(1), args[i + 1]);
        }
        new CuratorPeer(flags).run();
    }

    private String str(String name, String def) {
        String v = flags.getOrDefault(name, def);
        if (v == null) {
            throw new IllegalArgumentException("missing -" + name);
        }
        return v;
    }

    private int num(String name, int def) {
        return Integer.parseInt(str(name, Integer.toString(def)));
    }

    private void run() throws Exception {
        String scenario = str("scenario", null);
        int sessions = num("sessions", 1);
        switch (scenario) {
            case "mutex":
                cycling(sessions, i -> mutex(connect()));
                break;
            case "semaphore": {
                int leases = num("leases", 3);
                cycling(sessions, i -> semaphore(connect(), leases));
                break;
            }
            case "rwlock": {
                double reads = Double.parseDouble(str("reads", "0.9"));
                cycling(sessions, i -> rwlock(connect(), reads, i));
                break;
            }
            case "entity": {
                // One session, a thread per lock, each lock at a path of its own.
                int threads = num("threads", 1);
                CuratorFramework c = connect();
                cycling(threads, i -> mutex(c, path + "/e" + i), true, true);
                break;
            }
            case "queue":
                queue(sessions, num("waiters", 10));
                break;
            case "lost-reply":
                lostReply(sessions, num("cycles", 50));
                break;
            case "leader-resign":
                handoff(sessions, num("handoffs", 20), false);
                break;
            case "leader-close":
                handoff(sessions, num("handoffs", 20), true);
                break;
            default:
                throw new IllegalArgumentException("unknown -scenario " + scenario);
        }
        // The runner counts what is left on the server before we close.
        while (in.readLine() != null) {
            // wait for EOF
        }
        for (CuratorFramework c : clients) {
            c.close();
        }
        System.exit(0);
    }

    /** connect opens a session and waits until it is connected. */
    private CuratorFramework connect() throws Exception {
        // Curator's documented starting point for a retry policy.
        CuratorFramework c = CuratorFrameworkFactory.newClient(zk, sessionTimeoutMs, 15000,
                new ExponentialBackoffRetry(1000, 3));
        c.start();
        if (!c.blockUntilConnected(15, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + zk);
        }
        synchronized (clients) {
            clients.add(c);
        }
        return c;
    }

    private Locker mutex(CuratorFramework c) {
        return mutex(c, path);
    }

    private Locker mutex(CuratorFramework c, String lockPath) {
        InterProcessMutex m = new InterProcessMutex(c, lockPath);
        return new Locker() {
            public void lock() throws Exception {
                m.acquire();
            }

            public void unlock() throws Exception {
                m.release();
            }
        };
    }

    private Locker semaphore(CuratorFramework c, int leases) {
        InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, path, leases);
        return new Locker() {
            private Lease lease;

            public void lock() throws Exception {
                lease = s.acquire();
            }

            public void unlock() throws Exception {
                s.returnLease(lease);
            }
        };
    }

    private Locker rwlock(CuratorFramework c, double reads, int seed) {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
        Random rng = new Random(seed);
        return new Locker() {
            private InterProcessMutex held;

            public void lock() throws Exception {
                held = rng.nextDouble() < reads ? rw.readLock() : rw.writeLock();
                held.acquire();
            }

            public void unlock() throws Exception {
                held.release();
            }
        };
    }

    interface Opener {
        Locker open(int i) throws Exception;
    }

    /** Phases of a cycling measurement. */
    private volatile int phase; // 0 warm-up, 1 measure, 2 stop, 3 pause (guarded by pause)

    /** pause guards paused, the number of threads paused, and phase 3's end. */
    private final Object pause = new Object();
    private int paused;

    private void cycling(int sessions, Opener opener) throws Exception {
        cycling(sessions, opener, sessions == 1, false);
    }

    /**
     * cycling runs one thread per handle (per session, but for "entity"),
     * each cycling lock+unlock: warm-up, "ready", then measured from "go"
     * for -duration-ms. Latency is of the whole cycle when wholeCycle (one
     * session, or locks of their own), else of the lock call. With
     * quiesce, every thread pauses once its warm-up cycle is done before
     * "ready", so that the runner reads the request count while nothing is
     * in flight, and the measured cycles' requests are all it counts.
     */
    private void cycling(int sessions, Opener opener, boolean wholeCycle, boolean quiesce) throws Exception {
        List<Locker> lockers = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            lockers.add(opener.open(i));
        }
        List<List<Long>> lat = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        String[] failure = new String[1];
        for (int i = 0; i < sessions; i++) {
            List<Long> mine = new ArrayList<>();
            lat.add(mine);
            Locker l = lockers.get(i);
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        int p = phase;
                        if (p == 2) {
                            return;
                        }
                        if (p == 3) {
                            synchronized (pause) {
                                paused++;
                                pause.notifyAll();
                                while (phase == 3) {
                                    pause.wait();
                                }
                            }
                            continue;
                        }
                        long t0 = System.nanoTime();
                        l.lock();
                        long d = System.nanoTime() - t0;
                        l.unlock();
                        if (wholeCycle) {
                            d = System.nanoTime() - t0;
                        }
                        progress.incrementAndGet();
                        if (p == 1) {
                            mine.add(d);
                        }
                    }
                } catch (Exception e) {
                    synchronized (failure) {
                        failure[0] = String.valueOf(e);
                    }
                }
            });
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        waitMillis(num("warmup-ms", 500), failure);
        if (quiesce) {
            long deadline = System.nanoTime() + stallNs;
            synchronized (pause) {
                phase = 3;
                while (paused < sessions) {
                    checkFailure(failure);
                    if (System.nanoTime() > deadline) {
                        finish(new ArrayList<>(), 0, 0, null, "stalled", "pausing", true);
                    }
                    pause.wait(20);
                }
            }
        }
        System.out.println("ready");
        System.out.flush();
        expectGo();
        long start = System.nanoTime();
        synchronized (pause) {
            phase = 1;
            pause.notifyAll();
        }
        waitMillis(num("duration-ms", 2000), failure);
        long elapsed = System.nanoTime() - start;
        phase = 2;
        for (Thread t : threads) {
            long last = progress.get(), since = System.nanoTime();
            while (t.isAlive()) {
                t.join(50);
                if (progress.get() != last) {
                    last = progress.get();
                    since = System.nanoTime();
                } else if (System.nanoTime() - since > stallNs) {
                    finish(all(lat), elapsed, 0, null, "stalled", null, true);
                }
            }
        }
        checkFailure(failure);
        finish(all(lat), elapsed, 0, null, "ok", null, false);
    }

    /** waitMillis sleeps ms, ending the run when cycling stalls or fails. */
    private void waitMillis(long ms, String[] failure) throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        long last = progress.get(), since = System.nanoTime();
        while (System.nanoTime() < end) {
            Thread.sleep(20);
            checkFailure(failure);
            if (progress.get() != last) {
                last = progress.get();
                since = System.nanoTime();
            } else if (System.nanoTime() - since > stallNs) {
                finish(new ArrayList<>(), 0, 0, null, "stalled", null, true);
            }
        }
    }

    private void checkFailure(String[] failure) {
        synchronized (failure) {
            if (failure[0] != null) {
                finish(new ArrayList<>(), 0, 0, null, "error", failure[0], true);
            }
        }
    }

    private void expectGo() throws Exception {
        String line = in.readLine();
        if (!"go".equals(line)) {
            throw new IllegalStateException("expected \"go\", got " + line);
        }
    }

    /**
     * queue measures a queue drain: waiters threads, each with an
     * InterProcessMutex of its own on session i mod sessions, queue on one
     * lock behind a holder (on the first session). The used heap is read
     * before they start and once the runner, which watches the lock's
     * children, says they are all queued ("started", then "measure"). On
     * "go" the holder releases; each waiter releases as soon as it holds.
     * The result has the times the holder's release was called and
     * returned (release_ns) and, per waiter, the times its acquire and
     * release returned (held_ns), all from System.nanoTime.
     */
    private void queue(int sessions, int waiters) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            cs.add(connect());
        }
        warmDrains(cs, num("warmup-ms", 0));
        InterProcessMutex holder = new InterProcessMutex(cs.get(0), path);
        holder.acquire();
        long[][] held = new long[waiters][];
        long before = usedHeap();
        AtomicLong errors = new AtomicLong();
        String[] failure = new String[1];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < waiters; i++) {
            int n = i;
            Thread t = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(cs.get(n % sessions), path);
                    m.acquire();
                    long locked = System.nanoTime();
                    m.release();
                    held[n] = new long[] {locked, System.nanoTime()};
                } catch (Exception e) {
                    errors.incrementAndGet();
                    synchronized (failure) {
                        if (failure[0] == null) {
                            failure[0] = String.valueOf(e);
                        }
                    }
                }
                progress.incrementAndGet();
            });
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        System.out.println("started");
        System.out.flush();
        String line = in.readLine();
        if (!"measure".equals(line)) {
            throw new IllegalStateException("expected \"measure\", got " + line);
        }
        long after = usedHeap();
        System.out.println("ready");
        System.out.flush();
        expectGo();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(num("deadline-ms", 60000));
        long r0 = System.nanoTime();
        holder.release();
        long r1 = System.nanoTime();
        String extra = ",\"release_ns\":[" + r0 + "," + r1 + "],\"heap_before\":" + before + ",\"heap_after\":" + after;
        long last = progress.get(), since = System.nanoTime();
        for (Thread t : threads) {
            while (t.isAlive()) {
                t.join(50);
                long now = System.nanoTime();
                if (progress.get() != last) {
                    last = progress.get();
                    since = now;
                }
                String status = now > deadline ? "timeout" : now - since > stallNs ? "stalled" : null;
                if (status != null) {
                    extraJson = extra;
                    finish(new ArrayList<>(), now - r0, errors.get(), null, status, null, true);
                }
            }
        }
        List<long[]> done = new ArrayList<>();
        long end = r1;
        for (long[] h : held) {
            if (h != null) {
                done.add(h);
                end = Math.max(end, h[1]);
            }
        }
        extraJson = extra;
        synchronized (failure) {
            finish(new ArrayList<>(), end - r0, errors.get(), done, "ok", failure[0], false);
        }
    }

    /**
     * warmDrains lets drains of 10 threads (acquire, release) run on the
     * lock for ms, unmeasured, so that the JVM has loaded and compiled the
     * code of waiting and waking before the measured drain.
     */
    private void warmDrains(List<CuratorFramework> cs, long ms) throws Exception {
        String[] failure = new String[1];
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (System.nanoTime() < end) {
            List<Thread> ws = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                CuratorFramework c = cs.get(i % cs.size());
                Thread t = new Thread(() -> {
                    try {
                        InterProcessMutex m = new InterProcessMutex(c, path);
                        m.acquire();
                        m.release();
                    } catch (Exception e) {
                        synchronized (failure) {
                            failure[0] = String.valueOf(e);
                        }
                    }
                });
                t.setDaemon(true);
                ws.add(t);
                t.start();
            }
            for (Thread t : ws) {
                t.join(TimeUnit.NANOSECONDS.toMillis(stallNs));
                if (t.isAlive()) {
                    finish(new ArrayList<>(), 0, 0, null, "stalled", "warm-up drain", true);
                }
            }
            checkFailure(failure);
        }
    }

    /** usedHeap returns the JVM's used heap after two full collections. */
    private static long usedHeap() throws InterruptedException {
        Runtime rt = Runtime.getRuntime();
        System.gc();
        System.gc();
        Thread.sleep(100);
        return rt.totalMemory() - rt.freeMemory();
    }

    /** extraJson is appended to the result line's fields. */
    private String extraJson = "";

    /**
     * lostReply runs -cycles cycles of InterProcessMutex on each of sessions
     * sessions (pointed at the runner's fault proxy), counting errors and
     * recording when each cycle held the lock, for the runner to check for
     * overlaps. Latency is of the whole cycle.
     */
    private void lostReply(int sessions, int cycles) throws Exception {
        List<Locker> lockers = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            lockers.add(mutex(connect()));
        }
        System.out.println("ready");
        System.out.flush();
        expectGo();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(num("deadline-ms", 30000));
        AtomicLong errors = new AtomicLong();
        long holdMs = num("hold-ms", 1);
        List<Long> lat = new ArrayList<>();
        List<long[]> held = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (Locker l : lockers) {
            Thread t = new Thread(() -> {
                for (int n = 0; n < cycles; n++) {
                    long t0 = System.nanoTime();
                    try {
                        l.lock();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        continue;
                    }
                    long from = System.nanoTime();
                    try {
                        Thread.sleep(holdMs);
                    } catch (InterruptedException e) {
                        return;
                    }
                    long to = System.nanoTime();
                    try {
                        l.unlock();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                    }
                    synchronized (lat) {
                        lat.add(System.nanoTime() - t0);
                        held.add(new long[] {from, to});
                    }
                    progress.incrementAndGet();
                }
            });
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        long last = progress.get(), since = System.nanoTime();
        for (Thread t : threads) {
            while (t.isAlive()) {
                t.join(50);
                long now = System.nanoTime();
                if (progress.get() != last) {
                    last = progress.get();
                    since = now;
                }
                String status = now > deadline ? "timeout" : now - since > stallNs ? "stalled" : null;
                if (status != null) {
                    synchronized (lat) {
                        finish(new ArrayList<>(lat), now - start, errors.get(), new ArrayList<>(held), status, null, true);
                    }
                }
            }
        }
        finish(lat, System.nanoTime() - start, errors.get(), held, "ok", null, false);
    }

    /**
     * handoff measures the time from a leader's LeaderLatch.close (resign)
     * or CuratorFramework.close (close) to the next leader's isLeader
     * callback, over handoffs hand-offs among sessions participants; the
     * leader that left joins again at the back (close: on a new session).
     * Two unmeasured hand-offs come first.
     */
    private void handoff(int sessions, int handoffs, boolean closeClient) throws Exception {
        LinkedBlockingQueue<long[]> elected = new LinkedBlockingQueue<>();
        CuratorFramework[] cs = new CuratorFramework[sessions];
        LeaderLatch[] latches = new LeaderLatch[sessions];
        for (int i = 0; i < sessions; i++) {
            cs[i] = connect();
            latches[i] = latch(cs[i], i, elected);
        }
        System.out.println("ready");
        System.out.flush();
        expectGo();
        List<Long> lat = new ArrayList<>();
        long start = System.nanoTime();
        long[] cur = poll(elected, lat, start);
        int warm = 2;
        for (int h = 0; h < handoffs + warm; h++) {
            int i = (int) cur[0];
            long t0 = System.nanoTime();
            if (closeClient) {
                cs[i].close();
                cs[i] = connect();
            } else {
                latches[i].close();
            }
            latches[i] = latch(cs[i], i, elected);
            cur = poll(elected, lat, start);
            if (h >= warm) {
                lat.add(cur[1] - t0);
            }
        }
        finish(lat, System.nanoTime() - start, 0, null, "ok", null, false);
    }

    private LeaderLatch latch(CuratorFramework c, int i, LinkedBlockingQueue<long[]> elected) throws Exception {
        LeaderLatch l = new LeaderLatch(c, path, "peer-" + i);
        l.addListener(new LeaderLatchListener() {
            public void isLeader() {
                elected.add(new long[] {i, System.nanoTime()});
            }

            public void notLeader() {}
        });
        l.start();
        return l;
    }

    private long[] poll(LinkedBlockingQueue<long[]> q, List<Long> lat, long start) throws Exception {
        long[] e = q.poll(stallNs, TimeUnit.NANOSECONDS);
        if (e == null) {
            finish(lat, System.nanoTime() - start, 0, null, "stalled", null, true);
        }
        return e;
    }

    private static List<Long> all(List<List<Long>> lists) {
        List<Long> out = new ArrayList<>();
        for (List<Long> l : lists) {
            synchronized (l) {
                out.addAll(l);
            }
        }
        return out;
    }

    /**
     * finish prints the result line; with halt it exits at once, leaving
     * the sessions to expire.
     */
    private void finish(List<Long> lat, long elapsedNs, long errors, List<long[]> held,
            String status, String error, boolean halt) {
        StringBuilder b = new StringBuilder();
        b.append("{\"status\":\"").append(status).append('"');
        b.append(",\"elapsed_ns\":").append(elapsedNs);
        b.append(",\"errors\":").append(errors);
        b.append(",\"completed\":").append(progress.get());
        if (error != null) {
            b.append(",\"error\":\"").append(error.replace("\\", "\\\\").replace("\"", "'")).append('"');
        }
        b.append(",\"lat_ns\":[");
        for (int i = 0; i < lat.size(); i++) {
            b.append(i > 0 ? "," : "").append(lat.get(i));
        }
        b.append(']');
        if (held != null) {
            b.append(",\"held_ns\":[");
            for (int i = 0; i < held.size(); i++) {
                b.append(i > 0 ? "," : "").append('[').append(held.get(i)[0]).append(',').append(held.get(i)[1]).append(']');
            }
            b.append(']');
        }
        b.append(extraJson);
        b.append('}');
        System.out.println(b);
        System.out.flush();
        if (halt) {
            Runtime.getRuntime().halt(0);
        }
    }
}
