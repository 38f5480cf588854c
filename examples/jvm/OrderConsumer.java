import dev.delayq.Client;
import dev.delayq.DelayedQueue;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The demo's Java consumer: prints each order as it comes due. Args: url queue count idleSeconds. */
public final class OrderConsumer {
    private static final Pattern FIELD = Pattern.compile("\"(id|lang|due)\":\\s*\"?([^\",}]*)");

    public static void main(String[] args) {
        String url = args[0], queueName = args[1];
        int count = Integer.parseInt(args[2]);
        long idle = Long.parseLong(args[3]);
        try (Client client = Client.connect(url); DelayedQueue queue = client.delayedQueue(queueName)) {
            for (int i = 0; i < count; i++) {
                byte[] value = queue.take(Duration.ofSeconds(idle));
                if (value == null) break;
                long now = client.serverTimeMs();
                String id = "?", lang = "?";
                long due = now;
                Matcher m = FIELD.matcher(new String(value, StandardCharsets.UTF_8));
                while (m.find()) {
                    switch (m.group(1)) {
                        case "id" -> id = m.group(2);
                        case "lang" -> lang = m.group(2);
                        default -> due = Long.parseLong(m.group(2));
                    }
                }
                System.out.println("[java consumer] order " + id + " from " + lang + ", " + (now - due) + " ms late");
                System.out.flush();
            }
        }
    }
}
