// Contender is a Curator client that the interop tests drive over stdin, one
// command a line; it answers each on stdout. It is started as
//
//	java -cp CLASSES:JARS Contender SERVERS ID LOGFILE
//
// and connects to SERVERS with ID as its nodes' data, then prints "ready".
// Commands (KIND is mutex, read, write, leader or semaphore, the last an
// InterProcessSemaphoreV2 with one lease; PATH a lock directory):
//
//	hold KIND PATH        acquire, append "enter ID KIND" to LOGFILE, print "held"
//	release               append "exit ID KIND" to LOGFILE, release, print "released"
//	loop KIND PATH N MS   N times: acquire, log enter, sleep MS, log exit, release; print "looped"
//	hold-revocable PATH   acquire a revocable InterProcessMutex, print "held"; print
//	                      "revoked" when asked to let go (from its listener)
//	revoke NODEPATH       Revoker.attemptRevoke on a holder's node, print "revoke-sent"
//	quit                  close the client and exit
//
// A failed command prints "error " and the reason.
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class Contender {
    private static CuratorFramework client;
    private static String id;
    private static FileOutputStream log;

    // Held is what one acquire holds, with its release.
    private interface Held {
        void release() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        id = args[1];
        log = new FileOutputStream(args[2], true); // O_APPEND: one write per line
        client = CuratorFrameworkFactory.builder().connectString(args[0])
            .sessionTimeoutMs(10000).connectionTimeoutMs(10000)
            .retryPolicy(new ExponentialBackoffRetry(100, 5))
            .defaultData(id.getBytes(StandardCharsets.UTF_8)).build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("error no connection to " + args[0]);
            System.exit(1);
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Held held = null;
        String heldKind = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            try {
                switch (f[0]) {
                case "hold":
                    held = acquire(f[1], f[2]);
                    heldKind = f[1];
                    note("enter", heldKind);
                    reply("held");
                    break;
                case "release":
                    note("exit", heldKind);
                    held.release();
                    held = null;
                    reply("released");
                    break;
                case "loop":
                    int n = Integer.parseInt(f[3]);
                    long ms = Long.parseLong(f[4]);
                    for (int i = 0; i < n; i++) {
                        Held h = acquire(f[1], f[2]);
                        note("enter", f[1]);
                        Thread.sleep(ms);
                        note("exit", f[1]);
                        h.release();
                    }
                    reply("looped");
                    break;
                case "hold-revocable": {
                    InterProcessMutex m = new InterProcessMutex(client, f[1]);
                    m.makeRevocable(lock -> reply("revoked"));
                    m.acquire();
                    held = m::release;
                    heldKind = "mutex";
                    note("enter", heldKind);
                    reply("held");
                    break;
                }
                case "revoke":
                    Revoker.attemptRevoke(client, f[1]);
                    reply("revoke-sent");
                    break;
                case "quit":
                    client.close();
                    return;
                default:
                    reply("error unknown command " + f[0]);
                }
            } catch (Exception e) {
                reply("error " + e);
            }
        }
        client.close();
    }

    private static Held acquire(String kind, String path) throws Exception {
        switch (kind) {
        case "mutex": {
            InterProcessMutex m = new InterProcessMutex(client, path);
            m.acquire();
            return m::release;
        }
        case "read": {
            InterProcessMutex m = new InterProcessReadWriteLock(client, path).readLock();
            m.acquire();
            return m::release;
        }
        case "write": {
            InterProcessMutex m = new InterProcessReadWriteLock(client, path).writeLock();
            m.acquire();
            return m::release;
        }
        case "leader": {
            LeaderLatch l = new LeaderLatch(client, path, id);
            l.start();
            l.await();
            return l::close;
        }
        case "semaphore": {
            Lease lease = new InterProcessSemaphoreV2(client, path, 1).acquire();
            return lease::close;
        }
        default:
            throw new IllegalArgumentException("unknown kind " + kind);
        }
    }

    private static void note(String what, String kind) throws Exception {
        log.write((what + " " + id + " " + kind + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private static void reply(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
