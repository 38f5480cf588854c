package dev.delayq.interop;

import java.util.HexFormat;

/** Redisson's key names for a delayed queue (SPEC section 2), and byte helpers. */
final class Keys {
    private Keys() {
    }

    static String prefixed(String prefix, String name) {
        return name.contains("{") ? prefix + ":" + name : prefix + ":{" + name + "}";
    }

    static String timeoutSet(String name) {
        return prefixed("redisson_delay_queue_timeout", name);
    }

    static String queueList(String name) {
        return prefixed("redisson_delay_queue", name);
    }

    static String channel(String name) {
        return prefixed("redisson_delay_queue_channel", name);
    }

    static String hex(byte[] value) {
        return HexFormat.of().formatHex(value);
    }

    static String show(byte[] value) {
        String h = hex(value);
        return value.length + " bytes " + (h.length() > 40 ? h.substring(0, 40) + "..." : h);
    }

    static byte[] hexToBytes(String hex) {
        return HexFormat.of().parseHex(hex);
    }
}
