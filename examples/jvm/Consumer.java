import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/** Takes values as they become due and prints them; exits after COUNT values or 10 s of silence. */
public class Consumer {
    public static void main(String[] args) {
        String url = args.length > 0 ? args[0] : System.getenv().getOrDefault("REDIS_URL", "redis://127.0.0.1:6379");
        String queueName = args.length > 1 ? args[1] : "orders";
        int count = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        try (Client client = Client.connect(url);
                DelayedQueue queue = client.delayedQueue(queueName)) {
            for (int i = 0; i < count; i++) {
                byte[] value = queue.take(Duration.ofSeconds(10));
                if (value == null) {
                    System.err.println("nothing due for 10 s");
                    System.exit(1);
                }
                System.out.println("took " + new String(value, StandardCharsets.UTF_8) + " at " + client.serverTimeMs());
            }
        }
    }
}
