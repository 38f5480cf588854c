import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import dev.delayq.Delivery;
import dev.delayq.ReliableQueue;
import java.io.BufferedReader;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.HexFormat;

/** The JVM interop agent (delayed and reliable queues): see ../README.md. */
public final class Agent {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws IOException {
        String mode = args[0], url = args[1], kind = args[2], queueName = args[3];
        boolean reliable = switch (kind) {
            case "delayed" -> false;
            case "reliable" -> true;
            default -> throw new IllegalArgumentException("unknown queue kind " + kind);
        };
        try (Client client = Client.connect(url)) {
            if (reliable) {
                try (ReliableQueue queue = client.reliableQueue(queueName)) {
                    if (mode.equals("produce")) {
                        produce(args[4], args[5], (payload, delayMs) -> {
                            queue.offer(payload, Duration.ofMillis(delayMs));
                            return -1L;
                        });
                    } else {
                        consume(Long.parseLong(args[4]), args[5], client, () -> {
                            Delivery d = queue.receive(Duration.ofMillis(200));
                            if (d == null) return null;
                            d.ack();
                            return new Received(d.getPayload(), d.getDueAt());
                        });
                    }
                }
            } else {
                try (DelayedQueue queue = client.delayedQueue(queueName)) {
                    if (mode.equals("produce")) {
                        produce(args[4], args[5], (payload, delayMs) -> queue.offer(payload, Duration.ofMillis(delayMs)));
                    } else {
                        consume(Long.parseLong(args[4]), args[5], client, () -> {
                            byte[] value = queue.take(Duration.ofMillis(200));
                            return value == null ? null : new Received(value, -1);
                        });
                    }
                }
            }
        }
    }

    private interface Offerer {
        long offer(byte[] payload, long delayMs);
    }

    private record Received(byte[] payload, long dueMs) {}

    private interface Receiver {
        Received next();
    }

    private static void produce(String in, String out, Offerer offerer) throws IOException {
        try (BufferedReader reader = new BufferedReader(new FileReader(in));
             PrintWriter writer = new PrintWriter(new FileWriter(out))) {
            for (String line; (line = reader.readLine()) != null; ) {
                if (line.isEmpty()) continue;
                String[] parts = line.split("\t", -1);
                long due = offerer.offer(HEX.parseHex(parts[0]), Long.parseLong(parts[1]));
                writer.println(parts[0] + "\t" + due);
            }
        }
    }

    private static void consume(long idleMs, String out, Client client, Receiver receiver) throws IOException {
        try (PrintWriter writer = new PrintWriter(new FileWriter(out))) {
            long last = System.nanoTime();
            while ((System.nanoTime() - last) / 1_000_000 < idleMs) {
                Received got = receiver.next();
                if (got == null) continue;
                writer.println(HEX.formatHex(got.payload()) + "\t" + client.serverTimeMs() + "\t" + got.dueMs());
                writer.flush();
                last = System.nanoTime();
            }
        }
    }
}
