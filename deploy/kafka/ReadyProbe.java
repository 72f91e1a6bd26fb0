// Readiness probe for the local broker, run by start.sh as a single-file source program:
//   java -cp '<libs>/*' ReadyProbe.java <bootstrap> <timeout_s> [<pid>]
// Polls the broker with the Java AdminClient (describeCluster + listTopics) until it answers,
// the timeout elapses (exit 1) or the watched broker process dies (exit 2). Exit 0 = ready.
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

public class ReadyProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[1]));
        Long pid = args.length > 2 ? Long.valueOf(args[2]) : null;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        String last = "no attempt";
        try (Admin admin = Admin.create(p)) {
            while (System.nanoTime() < deadline) {
                if (pid != null && !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                    System.err.println("broker process " + pid + " exited");
                    System.exit(2);
                }
                try {
                    int nodes = admin.describeCluster().nodes().get(3, TimeUnit.SECONDS).size();
                    admin.listTopics().names().get(3, TimeUnit.SECONDS);
                    if (nodes > 0) {
                        System.out.println("ready: " + bootstrap + " (" + nodes + " node)");
                        System.exit(0);
                    }
                    last = "no broker registered yet";
                } catch (Exception e) {
                    last = e.toString();
                }
                Thread.sleep(250);
            }
        }
        System.err.println("broker at " + bootstrap + " did not answer in time; last error: " + last);
        System.exit(1);
    }
}
