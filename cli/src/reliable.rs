//! `delayq reliable ...`: the reliable queue from the command line.

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use delayq::{Backoff, Client, ReliableQueueOptions, ReliableSettings, Result, SchedulerOptions};

use crate::{decode_input, encode_output, output_failed, read_stdin, write_line, CliResult};

#[derive(Args)]
pub struct ReliableArgs {
    /// Visibility timeout of received messages, in ms. The queue's settings are stored in
    /// Redis: without this option the stored one is used; naming a different one is an
    /// error, except for `configure`, which stores it.
    #[arg(long, global = true)]
    visibility_ms: Option<u64>,
    /// Deliveries before a message goes to the dead letters (default: the stored setting).
    #[arg(long, global = true)]
    max_attempts: Option<u32>,
    #[command(subcommand)]
    command: ReliableCommand,
}

impl ReliableArgs {
    /// The `--timeout-ms` of `receive`, which counts the connect too.
    pub fn timeout(&self) -> Option<Duration> {
        match &self.command {
            ReliableCommand::Receive { timeout_ms, .. } => timeout_ms.map(Duration::from_millis),
            _ => None,
        }
    }
}

/// `configure`'s settings; each one left out keeps its stored value.
#[derive(Args)]
struct SettingsArgs {
    /// The back-off before retries: `exponential:BASE_MS:MAX_MS` or
    /// `schedule:MS,MS,...` (the last delay repeats).
    #[arg(long)]
    backoff: Option<String>,
    /// Sub-queues (a power of two, 1 to 1024), spread over a cluster's masters (see
    /// docs/cluster.md). Refused while the queue holds messages.
    #[arg(long)]
    shards: Option<u32>,
    /// How long dead letters are kept, in ms (0: until requeued or purged).
    #[arg(long)]
    dead_letter_retention_ms: Option<u64>,
    /// How long acked ids are remembered for de-duplication, in ms (0: not at all).
    #[arg(long)]
    idempotency_retention_ms: Option<u64>,
}

fn parse_backoff(text: &str) -> Result<Backoff> {
    let bad = || {
        delayq::Error::InvalidArgument(format!(
            "bad --backoff {text:?}: use exponential:BASE_MS:MAX_MS or schedule:MS,MS,..."
        ))
    };
    let ms = |w: &str| {
        w.trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| bad())
    };
    match text.split_once(':') {
        Some(("exponential", rest)) => {
            let (base, max) = rest.split_once(':').ok_or_else(bad)?;
            Ok(Backoff::Exponential {
                base: ms(base)?,
                max: ms(max)?,
            })
        }
        Some(("schedule", rest)) => Ok(Backoff::Schedule(
            rest.split(',').map(ms).collect::<Result<Vec<_>>>()?,
        )),
        _ => Err(bad()),
    }
}

fn print_settings(s: &ReliableSettings) -> String {
    let backoff = match &s.backoff {
        Backoff::Exponential { base, max } => {
            format!("exponential:{}:{}", base.as_millis(), max.as_millis())
        }
        Backoff::Schedule(d) => format!(
            "schedule:{}",
            d.iter()
                .map(|d| d.as_millis().to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let ms = |d: Option<Duration>| d.map_or(0, |d| d.as_millis());
    format!(
        "visibility_ms {}\nmax_attempts {}\nbackoff {}\nshards {}\ndead_letter_retention_ms {}\nidempotency_retention_ms {}",
        s.visibility_timeout.as_millis(),
        s.max_attempts,
        backoff,
        s.shards,
        ms(s.dead_letter_retention),
        ms(s.idempotency_retention),
    )
}

#[derive(Subcommand)]
enum ReliableCommand {
    /// Offer a message; prints its id. An id already waiting, ready or in flight (or acked
    /// within the idempotency retention) creates nothing: standard error says so.
    Offer {
        /// The queue's name.
        queue: String,
        /// Delay in milliseconds.
        delay_ms: u64,
        /// The payload; read from stdin when absent, all of it (one trailing newline, `\n` or
        /// `\r\n`, is dropped; an empty stdin, as `</dev/null`, offers an empty payload).
        value: Option<String>,
        /// The message id (default: a generated one). An id still waiting or in flight is
        /// not offered twice.
        #[arg(long)]
        id: Option<String>,
        /// On a sharded queue: the shard is chosen by this key instead of the id (messages
        /// with one key share a shard).
        #[arg(long)]
        shard_key: Option<String>,
    },
    /// Receive messages, print one per line, and ack each once printed (unless --no-ack). A
    /// message that cannot be printed (standard output closed or full) is given back.
    Receive {
        /// The queue's name.
        queue: String,
        /// Stop waiting after this long (counting the connect); 0 takes what is ready now.
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// Exit after this many messages (at least 1).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
        /// Print `id<TAB>attempt<TAB>value` instead of the value alone.
        #[arg(long)]
        show_id: bool,
        /// Leave the messages in flight: they come back after the visibility timeout.
        #[arg(long)]
        no_ack: bool,
        /// After receiving, keep running (holding the messages, unacked: implies
        /// --no-ack, their leases extended as they run out) until Ctrl-C or SIGTERM, which
        /// give the held messages back (not counted as an attempt).
        #[arg(long)]
        hold: bool,
    },
    /// Remove a message no consumer has received yet (waiting or ready); prints true or false.
    Cancel {
        /// The queue's name.
        queue: String,
        /// The message id.
        id: String,
    },
    /// Move a message no consumer has received yet (waiting or ready) to a new due time; prints true or false.
    Reschedule {
        /// The queue's name.
        queue: String,
        /// The message id.
        id: String,
        /// The new delay from now, in milliseconds.
        delay_ms: u64,
    },
    /// Print the counts (delayed, ready, in_flight, dead) and the stored settings, after one
    /// transfer pass (due messages made ready, ended leases taken back or buried).
    Stats {
        /// The queue's name.
        queue: String,
    },
    /// Store the queue's settings (the given ones; the rest keep their stored value, or
    /// the defaults for a new queue) and print them. Every handle in every process uses
    /// the stored settings.
    Configure {
        /// The queue's name.
        queue: String,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// Print dead letters as `id<TAB>attempts<TAB>value` (after one transfer pass, so a
    /// lease that ended on the last attempt is among them).
    Dead {
        /// The queue's name.
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Make dead letters ready again (the given ids, or all; after one transfer pass);
    /// prints the count.
    RequeueDead {
        /// The queue's name.
        queue: String,
        /// The ids of the dead letters to requeue (default: all).
        ids: Vec<String>,
    },
    /// Delete every dead letter (after one transfer pass); prints the count.
    PurgeDead {
        /// The queue's name.
        queue: String,
    },
}

impl ReliableCommand {
    fn queue(&self) -> &str {
        use ReliableCommand::*;
        match self {
            Offer { queue, .. } | Receive { queue, .. } | Cancel { queue, .. } => queue,
            Reschedule { queue, .. } | Stats { queue } | Configure { queue, .. } => queue,
            Dead { queue, .. } | RequeueDead { queue, .. } | PurgeDead { queue } => queue,
        }
    }
}

/// Runs a `reliable` subcommand, its input checked before `connect` runs; `deadline`: the
/// end of `receive --timeout-ms`, counted from before the connect.
pub async fn run(
    connect: impl std::future::Future<Output = Result<Client>>,
    base64: bool,
    args: ReliableArgs,
    deadline: Option<Instant>,
) -> CliResult<()> {
    let mut opts = ReliableQueueOptions {
        visibility_timeout: args.visibility_ms.map(Duration::from_millis),
        max_attempts: args.max_attempts,
        ..Default::default()
    };
    // Only `receive` waits, so only it runs the transfer task; the short commands that
    // read counts or dead letters (`stats`, `dead`, `requeue-dead`, `purge-dead`) run one
    // transfer pass first instead (`transfer_now`: due messages made ready, and leases
    // that ended taken back, or buried when it was the last attempt), so that what they
    // show does not wait for some long-running process to do it.
    let consuming = matches!(args.command, ReliableCommand::Receive { .. });
    if !consuming {
        opts.scheduler = SchedulerOptions {
            enabled: false,
            ..Default::default()
        };
    }
    if let ReliableCommand::Configure { settings, .. } = &args.command {
        opts.backoff = settings.backoff.as_deref().map(parse_backoff).transpose()?;
        opts.shards = settings.shards;
        opts.dead_letter_retention = settings.dead_letter_retention_ms.map(Duration::from_millis);
        opts.idempotency_retention = settings.idempotency_retention_ms.map(Duration::from_millis);
        opts.update_settings = true;
    }
    // Bad input is refused before anything connects (an offer's payload is read first).
    delayq::check_reliable_queue(args.command.queue(), &opts)?;
    let mut payload = None;
    match &args.command {
        ReliableCommand::Offer {
            delay_ms,
            value,
            id,
            shard_key,
            ..
        } => {
            let value = match value {
                Some(v) => v.clone().into_bytes(),
                None => read_stdin()?,
            };
            let value = decode_input(value, base64)?;
            let delay = Duration::from_millis(*delay_ms);
            delayq::check_message(&value, delay, id.as_deref(), shard_key.as_deref())?;
            payload = Some(value);
        }
        ReliableCommand::Cancel { id, .. } => delayq::check_id(id)?,
        ReliableCommand::Reschedule { id, delay_ms, .. } => {
            delayq::check_id(id)?;
            delayq::delay::delay_to_millis(Duration::from_millis(*delay_ms))?;
        }
        ReliableCommand::RequeueDead { ids, .. } => {
            ids.iter().try_for_each(|id| delayq::check_id(id))?;
        }
        _ => {}
    }
    let client = connect.await?;
    // What the short commands print: what they did is done, whether printed or not.
    let line = |text: Vec<u8>| {
        write_line(&text).map_err(|e| output_failed(e, "the command was carried out"))
    };
    match args.command {
        ReliableCommand::Offer {
            queue,
            delay_ms,
            value: _, // read above, before the connect
            id,
            shard_key,
        } => {
            let q = client.reliable_queue(&queue, opts)?;
            let value = payload.take().unwrap_or_default();
            let outcome = q
                .offer_with_shard_key(
                    value,
                    Duration::from_millis(delay_ms),
                    id.as_deref(),
                    shard_key.as_deref(),
                )
                .await?;
            if !outcome.created {
                say!(
                    "delayq: a message with id {:?} is already there; nothing was created (payload and due time unchanged)",
                    outcome.id
                );
            }
            line(outcome.id.into_bytes())?;
        }
        ReliableCommand::Receive {
            queue,
            timeout_ms: _, // counted in `deadline`, from before the connect
            count,
            show_id,
            no_ack,
            hold,
        } => {
            let q = client.reliable_queue(&queue, opts)?;
            let (mut held, mut leases) = (Vec::<delayq::Delivery>::new(), Vec::new());
            // Listening from the start: a Ctrl-C right after a line was printed is not lost.
            let (mut stop, gone) = (crate::stop_flag(), crate::output_watch());
            // Set when the reader of the output went away while messages were still owed.
            let mut output_gone = false;
            let mut reconnects = crate::Reconnects::new();
            for _ in 0..count {
                // Waits of at most STOP_CHECK, never cut short: Ctrl-C or SIGTERM ends the
                // command between two, as if the count was reached.
                let got = loop {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if *stop.borrow() {
                        break None;
                    }
                    if gone.load(std::sync::atomic::Ordering::SeqCst) {
                        output_gone = true;
                        break None;
                    }
                    // Out of time (or --timeout-ms 0): what is ready now, without waiting
                    // (a zero timeout moves what is due first).
                    if left == Some(Duration::ZERO) {
                        break q.receive(left).await?;
                    }
                    let wait = left.map_or(crate::STOP_CHECK, |l| l.min(crate::STOP_CHECK));
                    let received = q.receive(Some(wait)).await;
                    if let Some(d) = reconnects.after(received, deadline).await? {
                        break Some(d);
                    }
                };
                let Some(d) = got else {
                    break;
                };
                let mut text = Vec::new();
                if show_id {
                    text.extend_from_slice(format!("{}\t{}\t", d.id, d.attempt).as_bytes());
                }
                text.extend(encode_output(&d.payload, base64));
                // Printed, then acked: a message that could not be printed goes back, not
                // counted as an attempt, for the next consumer.
                if let Err(e) = write_line(&text) {
                    let mut after = match d.release().await {
                        Ok(_) => "the message was given back to the queue".to_owned(),
                        Err(back) => format!(
                            "the message could not be given back ({back}); it comes back after its visibility timeout"
                        ),
                    };
                    // Held ones go back too, as when the reader's leaving is seen first.
                    leases
                        .iter()
                        .for_each(|kept: &tokio::task::JoinHandle<_>| kept.abort());
                    let mut kept_back = 0;
                    for d in held.iter().filter(|_| hold) {
                        if matches!(d.release().await, Ok(true)) {
                            kept_back += 1;
                        }
                    }
                    if kept_back > 0 {
                        after.push_str(&format!(", and the {kept_back} held before it too"));
                    }
                    return Err(output_failed(e, &after));
                }
                // Held messages are not acked: `--hold` keeps their leases until the end,
                // then gives them back.
                if hold {
                    let (kept, mut until) = (d.clone(), stop.clone());
                    leases.push(tokio::spawn(async move {
                        let stopped = async move {
                            let _ = until.wait_for(|stopped| *stopped).await;
                        };
                        kept.while_leased(stopped).await
                    }));
                    held.push(d);
                } else if no_ack {
                    held.push(d);
                } else {
                    d.ack().await?;
                }
            }
            if hold {
                // Until Ctrl-C or SIGTERM, which give the held messages back (not counted
                // as an attempt) rather than leave them to their visibility timeout; at once
                // when the output's reader went away before all were printed.
                if output_gone {
                    leases
                        .iter()
                        .for_each(|kept: &tokio::task::JoinHandle<_>| kept.abort());
                } else {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                }
                for kept in leases {
                    let _ = kept.await;
                }
                let mut lost = 0;
                for d in held {
                    if !d.release().await? {
                        lost += 1;
                    }
                }
                if lost > 0 {
                    say!("delayq: {lost} held message(s) had lost their lease (taken back for another delivery) and were not given back here");
                }
            }
            if output_gone {
                let after = "stopped waiting, with nothing received since the last message printed";
                return Err(crate::output_gone(after));
            }
        }
        ReliableCommand::Cancel { queue, id } => {
            let q = client.reliable_queue(&queue, opts)?;
            line(q.cancel(&id).await?.to_string().into_bytes())?;
        }
        ReliableCommand::Reschedule {
            queue,
            id,
            delay_ms,
        } => {
            let q = client.reliable_queue(&queue, opts)?;
            let moved = q.reschedule(&id, Duration::from_millis(delay_ms)).await?;
            line(moved.to_string().into_bytes())?;
        }
        ReliableCommand::Stats { queue } => {
            let q = client.reliable_queue(&queue, opts)?;
            q.transfer_now().await?;
            let s = q.stats().await?;
            line(
                format!(
                    "delayed {}\nready {}\nin_flight {}\ndead {}\n{}",
                    s.delayed,
                    s.ready,
                    s.in_flight,
                    s.dead,
                    print_settings(&q.settings().await?)
                )
                .into_bytes(),
            )?;
        }
        ReliableCommand::Configure { queue, .. } => {
            let q = client.reliable_queue(&queue, opts)?;
            line(print_settings(&q.settings().await?).into_bytes())?;
        }
        ReliableCommand::Dead { queue, limit } => {
            let q = client.reliable_queue(&queue, opts)?;
            q.transfer_now().await?;
            for d in q.dead_letters(limit).await? {
                let mut text = format!("{}\t{}\t", d.id, d.attempts).into_bytes();
                text.extend(encode_output(&d.payload, base64));
                line(text)?;
            }
        }
        ReliableCommand::RequeueDead { queue, ids } => {
            let q = client.reliable_queue(&queue, opts)?;
            q.transfer_now().await?;
            let n = q
                .requeue_dead((!ids.is_empty()).then_some(ids.as_slice()))
                .await?;
            line(n.to_string().into_bytes())?;
        }
        ReliableCommand::PurgeDead { queue } => {
            let q = client.reliable_queue(&queue, opts)?;
            q.transfer_now().await?;
            let n = q.purge_dead().await?;
            line(n.to_string().into_bytes())?;
        }
    }
    client.close();
    Ok(())
}
