//! Offers orders with delays to a delayed queue.
//!
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run -p delayq-examples --bin producer -- orders 10`

use std::time::Duration;

#[tokio::main]
async fn main() -> delayq::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut args = std::env::args().skip(1);
    let queue_name = args.next().unwrap_or_else(|| "orders".into());
    let count: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10);

    let client = delayq::Client::connect(&url).await?;
    let queue = client.delayed_queue(&queue_name)?;
    for i in 0..count {
        let delay = Duration::from_millis(200 * (i % 10));
        // The due estimate lets consumers print how late the order arrived.
        let due = client.server_time_ms().await? + delay.as_millis() as i64;
        let order = serde_json::json!({ "id": format!("rust-{i}"), "lang": "rust", "due": due });
        queue.offer(order.to_string(), delay).await?;
        println!("offered rust-{i}, due in {} ms", delay.as_millis());
    }
    client.close();
    Ok(())
}
