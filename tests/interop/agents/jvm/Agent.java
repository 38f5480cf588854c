import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import java.io.BufferedReader;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.HexFormat;

/** The JVM interop agent (delayed queue): see ../README.md. */
public final class Agent {
    public static void main(String[] args) throws IOException {
        String mode = args[0], url = args[1], kind = args[2], queueName = args[3];
        if (!kind.equals("delayed")) throw new IllegalArgumentException("the JVM agent has no " + kind + " queue");
        HexFormat hex = HexFormat.of();
        try (Client client = Client.connect(url); DelayedQueue queue = client.delayedQueue(queueName)) {
            if (mode.equals("produce")) {
                try (BufferedReader in = new BufferedReader(new FileReader(args[4]));
                     PrintWriter out = new PrintWriter(new FileWriter(args[5]))) {
                    for (String line; (line = in.readLine()) != null; ) {
                        if (line.isEmpty()) continue;
                        String[] parts = line.split("\t", -1);
                        long due = queue.offer(hex.parseHex(parts[0]), Duration.ofMillis(Long.parseLong(parts[1])));
                        out.println(parts[0] + "\t" + due);
                    }
                }
            } else {
                long idle = Long.parseLong(args[4]);
                try (PrintWriter out = new PrintWriter(new FileWriter(args[5]))) {
                    long last = System.nanoTime();
                    while ((System.nanoTime() - last) / 1_000_000 < idle) {
                        byte[] value = queue.take(Duration.ofMillis(200));
                        if (value == null) continue;
                        out.println(hex.formatHex(value) + "\t" + client.serverTimeMs() + "\t-1");
                        out.flush();
                        last = System.nanoTime();
                    }
                }
            }
        }
    }
}
