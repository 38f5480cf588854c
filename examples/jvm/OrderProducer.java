import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import java.time.Duration;

/** The demo's Java producer: offers orders with delays. Args: url queue count. */
public final class OrderProducer {
    public static void main(String[] args) {
        String url = args[0], queueName = args[1];
        int count = Integer.parseInt(args[2]);
        try (Client client = Client.connect(url); DelayedQueue queue = client.delayedQueue(queueName)) {
            for (int i = 0; i < count; i++) {
                long delayMs = 200L * (i % 10);
                // The due estimate lets consumers print how late an order arrived.
                long due = client.serverTimeMs() + delayMs;
                String order = "{\"id\":\"java-" + i + "\",\"lang\":\"java\",\"due\":" + due + "}";
                queue.offer(order, Duration.ofMillis(delayMs));
                System.out.println("offered java-" + i + ", due in " + delayMs + " ms");
            }
        }
    }
}
