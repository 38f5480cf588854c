package dev.delayq

import java.io.File

/** Paths of the repository, and the Rust CLI built from it. */
object Workspace {
    val root: File = File(System.getProperty("delayq.workspace") ?: "..").canonicalFile

    val vectors: File get() = File(root, "tests/vectors/packing.json")

    /** `target/debug/delayq`, built with cargo on first use (into the same target dir as the library). */
    val cli: File by lazy {
        val marker = File(root, "bindings-jvm/target/cargo-target-dir")
        val targetDir = if (marker.exists()) File(marker.readText().trim()) else File(root, "target")
        val pb = ProcessBuilder("cargo", "build", "-q", "-p", "delayq-cli").directory(root).inheritIO()
        pb.environment()["CARGO_TARGET_DIR"] = targetDir.path
        check(pb.start().waitFor() == 0) { "cargo build -p delayq-cli failed" }
        File(targetDir, "debug/delayq").also { check(it.canExecute()) { "no CLI at $it" } }
    }

    /** Runs the CLI; returns stdout lines. */
    fun runCli(vararg args: String): List<String> {
        val p = ProcessBuilder(listOf(cli.path) + args).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        val out = p.inputStream.readBytes().toString(Charsets.UTF_8)
        check(p.waitFor() == 0) { "delayq ${args.toList()} failed" }
        return out.lines().filter { it.isNotEmpty() }
    }
}
