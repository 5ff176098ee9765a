// CuratorHold takes Curator's InterProcessMutex at a path, prints "held",
// and releases it when its stdin closes. The zklock tests run it with
// Debian's Curator jars: java -cp JARS CuratorHold.java SERVERS PATH DATA
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorHold {
    public static void main(String[] args) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(args[0])
            .retryPolicy(new RetryOneTime(100)).defaultData(args[2].getBytes("UTF-8")).build();
        c.start();
        InterProcessMutex m = new InterProcessMutex(c, args[1]);
        m.acquire();
        System.out.println("held");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
        m.release();
        c.close();
    }
}
