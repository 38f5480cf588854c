//! The tools the suite needs: `redis-server`, `redis-sentinel`, `redis-cli` from Debian,
//! and Toxiproxy's server built with `go install`. `scripts/test-faults.sh` installs them;
//! a test run without it (plain `cargo test -p delayq-faults -- --ignored`) calls that
//! script's `--install-only` part once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The root of the workspace.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `scripts/test-faults.sh` puts Toxiproxy's server (`DELAYQ_TOXIPROXY` overrides).
fn toxiproxy_path() -> PathBuf {
    if let Some(p) = std::env::var_os("DELAYQ_TOXIPROXY") {
        return PathBuf::from(p);
    }
    let tools = std::env::var_os("DELAYQ_FAULTS_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/faults-tools"));
    tools.join("bin/server")
}

fn on_path(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Installs what is missing (once per process) and returns the path of Toxiproxy's
/// server.
pub fn ensure() -> &'static Path {
    static TOXIPROXY: OnceLock<PathBuf> = OnceLock::new();
    TOXIPROXY.get_or_init(|| {
        let toxiproxy = toxiproxy_path();
        let ready = toxiproxy.is_file()
            && ["redis-server", "redis-sentinel", "redis-cli"]
                .iter()
                .all(|c| on_path(c));
        if !ready {
            let script = workspace_root().join("scripts/test-faults.sh");
            let status = Command::new("bash")
                .arg(&script)
                .arg("--install-only")
                .status()
                .expect("run scripts/test-faults.sh --install-only");
            assert!(
                status.success(),
                "installing the fault suite's tools failed"
            );
        }
        assert!(
            toxiproxy.is_file(),
            "no Toxiproxy server at {}",
            toxiproxy.display()
        );
        toxiproxy
    })
}
