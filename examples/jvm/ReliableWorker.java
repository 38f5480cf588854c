import dev.delayq.Backoff;
import dev.delayq.Client;
import dev.delayq.ReliableQueue;
import dev.delayq.ReliableQueueOptions;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;

/**
 * A reliable consumer: offers one job, then consumes with four handlers at a time, acking
 * what was handled and retrying what failed (the first attempt fails here on purpose). The
 * queue's settings are those of the Python and Node workers, so that they can take turns on
 * one queue (settings are stored with the queue: a handle naming others is refused).
 * Args: url queue (default worker-jobs).
 */
public class ReliableWorker {
    public static void main(String[] args) throws InterruptedException {
        String url = args.length > 0 ? args[0] : System.getenv().getOrDefault("REDIS_URL", "redis://127.0.0.1:6379");
        String queueName = args.length > 1 ? args[1] : "worker-jobs";
        ReliableQueueOptions options = new ReliableQueueOptions()
                .withVisibilityTimeout(Duration.ofSeconds(30))
                .withMaxAttempts(5)
                .withBackoff(Backoff.schedule(Duration.ofMillis(200), Duration.ofMinutes(3), Duration.ofMinutes(10)));
        try (Client client = Client.connect(url);
                ReliableQueue jobs = client.reliableQueue(queueName, options)) {
            jobs.offer("charge card 42", Duration.ofMillis(500), "invoice-42");
            CountDownLatch oneDone = new CountDownLatch(1);
            CompletableFuture<?> consuming = jobs.consumeAsync(delivery -> {
                System.out.println("[java worker] " + delivery.getId() + " attempt " + delivery.getAttempt()
                        + ": " + delivery.payloadString());
                if (delivery.getAttempt() == 1) throw new IllegalStateException("card network down; retry");
                oneDone.countDown(); // one job is enough for the example
            }, 4);
            oneDone.await();
            // The graceful close: running handlers finish and are acked, then consume returns.
            jobs.closeGracefully(Duration.ofSeconds(10));
            consuming.join();
            System.out.println("[java worker] done: " + client.reliableQueue(queueName).stats());
        }
    }
}
