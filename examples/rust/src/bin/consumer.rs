//! Takes orders from a delayed queue as they come due and prints how late each was.
//!
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run -p delayq-examples --bin consumer -- orders 10 5`
//! (queue, orders to take, idle seconds before giving up)

use std::time::Duration;

#[tokio::main]
async fn main() -> delayq::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut args = std::env::args().skip(1);
    let queue_name = args.next().unwrap_or_else(|| "orders".into());
    let count: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10);
    let idle_secs: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10);

    let client = delayq::Client::connect(&url).await?;
    let queue = client.delayed_queue(&queue_name)?;
    for _ in 0..count {
        // Stop after `idle_secs` without an order.
        let Some(value) = queue.take(Some(Duration::from_secs(idle_secs))).await? else {
            break;
        };
        let now = client.server_time_ms().await?;
        let order: serde_json::Value =
            serde_json::from_slice(&value).unwrap_or_else(|_| serde_json::json!({}));
        let late = order["due"].as_i64().map(|due| now - due).unwrap_or(0);
        println!(
            "[rust consumer] order {} from {}, {late} ms late",
            order["id"].as_str().unwrap_or("?"),
            order["lang"].as_str().unwrap_or("?")
        );
    }
    client.close();
    Ok(())
}
