import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import java.time.Duration;

/** Offers a few values with increasing delays and prints their due times (Unix ms, server clock). */
public class Producer {
    public static void main(String[] args) {
        String url = args.length > 0 ? args[0] : System.getenv().getOrDefault("REDIS_URL", "redis://127.0.0.1:6379");
        String queueName = args.length > 1 ? args[1] : "orders";
        int count = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        try (Client client = Client.connect(url);
                DelayedQueue queue = client.delayedQueue(queueName)) {
            for (int i = 1; i <= count; i++) {
                long due = queue.offer("order-" + i, Duration.ofMillis(200L * i));
                System.out.println("offered order-" + i + ", due at " + due);
            }
        }
    }
}
