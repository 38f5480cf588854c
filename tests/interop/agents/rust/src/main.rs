//! The Rust interop agent: see tests/interop/agents/README.md.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> delayq::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, url, kind, queue) = (&args[0], &args[1], &args[2], &args[3]);
    let client = delayq::Client::connect(url).await?;
    match mode.as_str() {
        "produce" => {
            let input = std::fs::File::open(&args[4]).expect("input file");
            let mut out = std::fs::File::create(&args[5]).expect("output file");
            let (delayed, reliable) = handles(&client, kind, queue)?;
            for line in std::io::BufReader::new(input).lines() {
                let line = line.expect("line");
                let (hex_payload, delay) = line.split_once('\t').expect("hex<TAB>delay");
                let payload = hex::decode(hex_payload).expect("hex");
                let delay = Duration::from_millis(delay.parse().expect("delay"));
                let due = match (&delayed, &reliable) {
                    (Some(q), _) => q.offer(&payload, delay).await?,
                    (_, Some(q)) => {
                        q.offer(&payload, delay, None).await?;
                        -1
                    }
                    _ => unreachable!(),
                };
                writeln!(out, "{hex_payload}\t{due}").expect("write");
            }
        }
        "consume" => {
            let idle = Duration::from_millis(args[4].parse().expect("idle ms"));
            let mut out = std::fs::File::create(&args[5]).expect("output file");
            let (delayed, reliable) = handles(&client, kind, queue)?;
            let mut last = Instant::now();
            while last.elapsed() < idle {
                let wait = Some(Duration::from_millis(200));
                let got = match (&delayed, &reliable) {
                    (Some(q), _) => q.take(wait).await?.map(|v| (v, -1)),
                    (_, Some(q)) => match q.receive(wait).await? {
                        Some(d) => {
                            d.ack().await?;
                            Some((d.payload.clone(), d.due_at))
                        }
                        None => None,
                    },
                    _ => unreachable!(),
                };
                if let Some((payload, due)) = got {
                    let now = client.server_time_ms().await?;
                    writeln!(out, "{}\t{now}\t{due}", hex::encode(&payload)).expect("write");
                    out.flush().expect("flush");
                    last = Instant::now();
                }
            }
        }
        other => panic!("unknown mode {other}"),
    }
    client.close();
    Ok(())
}

type Handles = (Option<delayq::DelayedQueue>, Option<delayq::ReliableQueue>);

fn handles(client: &delayq::Client, kind: &str, queue: &str) -> delayq::Result<Handles> {
    Ok(match kind {
        "delayed" => (Some(client.delayed_queue(queue)?), None),
        "reliable" => (
            None,
            Some(client.reliable_queue(queue, Default::default())?),
        ),
        other => panic!("unknown kind {other}"),
    })
}
