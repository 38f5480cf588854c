//! The dashboard end to end in headless Chromium (Debian's `/usr/bin/chromium`, driven by
//! `playwright-core` from npm; `bash scripts/test-serve.sh` installs both): the page
//! loads, counts change as the test offers, a dead letter is previewed and requeued with a
//! click, cancel and reschedule by id, purge; a screenshot is written under `target/`.
//!
//! Without Chromium or `serve/tests/browser/node_modules`, the test says so and passes,
//! unless `DELAYQ_REQUIRE_BROWSER=1` (set by scripts/test-serve.sh), where it fails.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use support::{config, Env, TOKEN};

fn screenshot_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    std::fs::create_dir_all(&target).unwrap();
    target.join("serve-dashboard.png")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_headless_chromium() {
    let browser_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser"));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let ready = browser_dir.join("node_modules/playwright-core").exists()
        && std::path::Path::new(&chromium).exists();
    if !ready {
        assert!(
            std::env::var("DELAYQ_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "Chromium or playwright-core missing: run bash scripts/test-serve.sh"
        );
        eprintln!(
            "skipped: no {chromium} or playwright-core (bash scripts/test-serve.sh installs them)"
        );
        return;
    }
    let env = Env::start(config()).await;
    env.call(
        "POST",
        "/v1/queues/web/messages",
        Some(json!({"payload": "first"})),
    )
    .await;
    env.configure("dl", 1, vec![Duration::from_millis(10)])
        .await;
    env.call(
        "POST",
        "/v1/queues/dl/messages",
        Some(json!({"payload": "{\"x\":1,\"y\":[2,3]}", "id": "dead-1"})),
    )
    .await;
    env.receive_and("dl", "nack").await;

    let shot = screenshot_path();
    let _ = std::fs::remove_file(&shot);
    let out = tokio::process::Command::new("node")
        .arg(browser_dir.join("dashboard.js"))
        .current_dir(&browser_dir)
        .env("BASE", &env.base)
        .env("TOKEN", TOKEN)
        .env("SCREENSHOT", &shot)
        .env("CHROMIUM", &chromium)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the browser test took over 2 minutes")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "screenshot written"
    );
    env.stop().await;
}
