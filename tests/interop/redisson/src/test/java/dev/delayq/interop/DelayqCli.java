package dev.delayq.interop;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The delayq side of the tests: the {@code delayq} command line, run as a subprocess.
 * Its path comes from the system property {@code delayq.cli} or the environment
 * variable {@code DELAYQ_CLI} (scripts/test-interop.sh sets the property).
 */
final class DelayqCli implements AutoCloseable {
    private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(60);

    private final String binary;
    private final String url;
    private final List<Process> started = new CopyOnWriteArrayList<>();
    private final List<Path> logs = new CopyOnWriteArrayList<>();

    DelayqCli(String url) {
        this.binary = binaryPath();
        this.url = url;
    }

    static String binaryPath() {
        String path = System.getProperty("delayq.cli");
        if (path == null || path.isBlank() || path.startsWith("${")) {
            path = System.getenv("DELAYQ_CLI");
        }
        if (path == null || path.isBlank()) {
            throw new IllegalStateException(
                    "set -Ddelayq.cli=/abs/path/to/delayq (or DELAYQ_CLI): the delayq CLI binary");
        }
        if (!Files.isExecutable(Path.of(path))) {
            throw new IllegalStateException("delayq CLI not executable: " + path);
        }
        return path;
    }

    /** A value received by {@code delayq take}, with the local time its line was read. */
    record Received(byte[] value, long atMillis) {
    }

    /** {@code delayq offer}: returns the due time (server ms) that the CLI printed. */
    long offer(String queue, long delayMs, byte[] value, boolean base64) {
        List<String> args = new ArrayList<>(List.of("offer", queue, String.valueOf(delayMs)));
        args.add(base64 ? Base64.getEncoder().encodeToString(value) : new String(value, StandardCharsets.UTF_8));
        if (base64) {
            args.add("--base64");
        }
        String out = run(args).trim();
        try {
            return Long.parseLong(out);
        } catch (NumberFormatException e) {
            throw new AssertionError("delayq offer printed " + out + ", not a due time");
        }
    }

    /** {@code delayq stats}: delayed, ready and corrupt counts. */
    Map<String, Long> stats(String queue) {
        Map<String, Long> counts = new HashMap<>();
        for (String line : run(List.of("stats", queue)).split("\n")) {
            String[] parts = line.trim().split("\\s+");
            if (parts.length == 2) {
                counts.put(parts[0], Long.parseLong(parts[1]));
            }
        }
        if (!counts.keySet().containsAll(List.of("delayed", "ready", "corrupt"))) {
            throw new AssertionError("unexpected delayq stats output: " + counts);
        }
        return counts;
    }

    long delayed(String queue) {
        return stats(queue).get("delayed");
    }

    /** Starts {@code delayq take QUEUE --count N --timeout-ms T}; values are read as they arrive. */
    Take take(String queue, int count, Duration timeout, boolean base64) throws IOException {
        List<String> args = new ArrayList<>(List.of("take", queue, "--count", String.valueOf(count),
                "--timeout-ms", String.valueOf(timeout.toMillis())));
        if (base64) {
            args.add("--base64");
        }
        Path err = Files.createTempFile("delayq-take-", ".log");
        Process p = builder(args).redirectError(err.toFile()).start();
        started.add(p);
        return new Take(p, base64, err);
    }

    /** Starts {@code delayq transfer QUEUE}: delayq's scheduler alone, until closed. */
    Process transfer(String queue) throws IOException {
        return transfer(queue, Duration.ofSeconds(1));
    }

    /** {@code delayq transfer QUEUE --reconcile-ms R}: a long R leaves only the channel and timers to wake it. */
    Process transfer(String queue, Duration reconcile) throws IOException {
        Path log = Files.createTempFile("delayq-transfer-", ".log");
        ProcessBuilder b = builder(List.of("transfer", queue, "--reconcile-ms", String.valueOf(reconcile.toMillis())))
                .redirectErrorStream(true).redirectOutput(log.toFile());
        b.environment().put("RUST_LOG", "delayq=info");
        logs.add(log);
        Process p = b.start();
        started.add(p);
        return p;
    }

    private ProcessBuilder builder(List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary);
        cmd.add("--url");
        cmd.add(url);
        cmd.addAll(args);
        ProcessBuilder b = new ProcessBuilder(cmd);
        b.environment().remove("REDIS_URL");
        return b;
    }

    private String run(List<String> args) {
        try {
            Path err = Files.createTempFile("delayq-cli-", ".log");
            try {
                Process p = builder(args).redirectError(err.toFile()).start();
                byte[] out = p.getInputStream().readAllBytes();
                if (!p.waitFor(COMMAND_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    throw new AssertionError("delayq " + args + " did not finish");
                }
                if (p.exitValue() != 0) {
                    throw new AssertionError("delayq " + args + " exited with " + p.exitValue() + ": "
                            + Files.readString(err));
                }
                return new String(out, StandardCharsets.UTF_8);
            } finally {
                Files.deleteIfExists(err);
            }
        } catch (IOException e) {
            throw new AssertionError("could not run delayq " + args, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted running delayq " + args, e);
        }
    }

    /** Stops every process this helper started that is still running. */
    @Override
    public void close() {
        for (Process p : started) {
            stop(p);
        }
        for (Path log : logs) {
            try {
                String text = Files.readString(log);
                if (text.contains("WARN") || text.contains("ERROR")) {
                    System.err.println("delayq transfer log " + log + ":\n" + text);
                }
                Files.deleteIfExists(log);
            } catch (IOException e) {
                // a leftover temporary file is harmless
            }
        }
    }

    static void stop(Process p) {
        if (!p.isAlive()) {
            return;
        }
        p.destroy(); // SIGTERM
        try {
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A running {@code delayq take}: its lines, timestamped as they are read. */
    static final class Take {
        private final Process process;
        private final boolean base64;
        private final Path err;
        private final List<Received> received = new CopyOnWriteArrayList<>();
        private final Thread reader;

        private Take(Process process, boolean base64, Path err) {
            this.process = process;
            this.base64 = base64;
            this.err = err;
            this.reader = new Thread(this::readLines, "delayq-take-reader");
            reader.setDaemon(true);
            reader.start();
        }

        private void readLines() {
            try (InputStream in = process.getInputStream()) {
                ByteArrayOutputStream line = new ByteArrayOutputStream();
                int b;
                while ((b = in.read()) != -1) {
                    if (b == '\n') {
                        long at = System.currentTimeMillis();
                        byte[] bytes = line.toByteArray();
                        received.add(new Received(base64 ? Base64.getDecoder().decode(bytes) : bytes, at));
                        line.reset();
                    } else {
                        line.write(b);
                    }
                }
            } catch (IOException e) {
                // the process ended; what was read stays in `received`
            }
        }

        List<Received> received() {
            return List.copyOf(received);
        }

        /** Waits for the process to exit (after its count or its timeout) and returns what it printed. */
        List<Received> awaitExit(Duration timeout) throws Exception {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                stop(process);
                throw new AssertionError("delayq take did not exit within " + timeout
                        + "; received " + received.size() + " values so far");
            }
            reader.join(TimeUnit.SECONDS.toMillis(10));
            if (process.exitValue() != 0) {
                throw new AssertionError("delayq take exited with " + process.exitValue() + ": "
                        + Files.readString(err));
            }
            Files.deleteIfExists(err);
            return received();
        }
    }
}
