//! Counting what a fault did to delivery.
//!
//! - **expected**: a value whose offer was acknowledged to the producer (the call
//!   returned its due time or id). These must all arrive.
//! - **unknown**: a value whose offer failed with an error: its outcome is unknown (the
//!   reply may have been lost after the server ran it). It may arrive or not, but not
//!   twice.
//! - **delivered**: expected values received by a consumer at least once (a value in the
//!   consumer's hands, not an ack whose reply came back).
//! - **lost**: expected values never received.
//! - **duplicated**: receipts beyond the first of any value.
//! - **early**: receipts before the value's due time (server clock, less the clock's
//!   error and one millisecond of rounding).
//! - **late**: first receipt minus due time, in server ms; the worst is reported.
//!
//! Values are unique per scenario, so a value names its message.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::ErrorKind;

use crate::observe::ServerClock;

/// When a value is due, in server ms: `min` is the earliest it can be (server time before
/// the offer was sent plus the delay), `max` the latest (server time when the reply came,
/// plus the delay). Equal when the server reported the due time.
#[derive(Debug, Clone, Copy)]
struct Due {
    min: i64,
    max: i64,
}

#[derive(Default)]
struct State {
    expected: HashMap<Vec<u8>, Due>,
    unknown: HashSet<Vec<u8>>,
    /// Receipt times (server ms) of every value received, in order.
    receipts: HashMap<Vec<u8>, Vec<i64>>,
    /// The due time the server reported with the first receipt (reliable queue).
    reported_due: HashMap<Vec<u8>, i64>,
    /// Local instants of every receipt, for recovery times.
    receipt_instants: Vec<Instant>,
    /// Calls that failed: when, which call, the error kind and message.
    errors: Vec<(Instant, &'static str, ErrorKind, String)>,
    /// Successful consumer calls (a value or none), for recovery times.
    successes: Vec<Instant>,
    acks_failed: u64,
    unexpected: u64,
    /// The longest offer call.
    offer_max: Duration,
}

/// The counts of one scenario (one queue).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Acknowledged offers.
    pub expected: usize,
    /// Offers whose outcome is unknown.
    pub unknown: usize,
    /// Of those, how many arrived.
    pub unknown_delivered: usize,
    /// Expected values received at least once.
    pub delivered: usize,
    /// Expected values never received.
    pub lost: usize,
    /// The lost values (a few, for messages).
    pub lost_sample: Vec<String>,
    /// Receipts beyond the first of any value.
    pub duplicated: usize,
    /// Receipts before the due time.
    pub early: usize,
    /// The worst first-receipt lateness (ms).
    pub worst_late_ms: Option<i64>,
    /// The value that was latest.
    pub worst_value: Option<String>,
    /// Values received that nobody offered.
    pub unexpected: u64,
    /// Acks that failed (error) or found the delivery already over (`false`).
    pub acks_failed: u64,
    /// Failed calls by kind.
    pub errors: BTreeMap<String, usize>,
    /// The longest offer call (ms).
    pub offer_max_ms: u128,
}

impl Summary {
    /// The counts of two queues together (one report line for both).
    pub fn merge(&self, other: &Summary) -> Summary {
        let mut errors = self.errors.clone();
        for (k, n) in &other.errors {
            *errors.entry(k.clone()).or_default() += n;
        }
        Summary {
            expected: self.expected + other.expected,
            unknown: self.unknown + other.unknown,
            unknown_delivered: self.unknown_delivered + other.unknown_delivered,
            delivered: self.delivered + other.delivered,
            lost: self.lost + other.lost,
            lost_sample: self
                .lost_sample
                .iter()
                .chain(&other.lost_sample)
                .cloned()
                .collect(),
            duplicated: self.duplicated + other.duplicated,
            early: self.early + other.early,
            worst_late_ms: self.worst_late_ms.max(other.worst_late_ms),
            worst_value: if self.worst_late_ms >= other.worst_late_ms {
                self.worst_value.clone()
            } else {
                other.worst_value.clone()
            },
            unexpected: self.unexpected + other.unexpected,
            acks_failed: self.acks_failed + other.acks_failed,
            offer_max_ms: self.offer_max_ms.max(other.offer_max_ms),
            errors,
        }
    }
}

/// What one queue's producers offered and its consumers received.
pub struct Tally {
    clock: ServerClock,
    state: Mutex<State>,
}

impl Tally {
    /// An empty tally stamping receipts with `clock`.
    pub fn new(clock: ServerClock) -> Arc<Tally> {
        Arc::new(Tally {
            clock,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The clock receipts are stamped with.
    pub fn clock(&self) -> ServerClock {
        self.clock
    }

    /// An offer of `value` is about to be sent: until it is acknowledged, its outcome is
    /// unknown (and a consumer may already get it).
    pub fn offering(&self, value: &[u8]) {
        self.state().unknown.insert(value.to_vec());
    }

    /// An acknowledged offer of `value`, due between `due_min` and `due_max` (server ms).
    pub fn offered(&self, value: &[u8], due_min: i64, due_max: i64) {
        let mut s = self.state();
        s.unknown.remove(value);
        s.expected.insert(
            value.to_vec(),
            Due {
                min: due_min,
                max: due_max,
            },
        );
    }

    /// A consumer holds `value` now; `reported_due` is the due time the server gave with
    /// it, if any.
    pub fn received(&self, value: &[u8], reported_due: Option<i64>) {
        let at = self.clock.now_ms();
        let mut s = self.state();
        s.receipt_instants.push(Instant::now());
        s.successes.push(Instant::now());
        if !s.expected.contains_key(value) && !s.unknown.contains(value) {
            s.unexpected += 1;
        }
        let first = !s.receipts.contains_key(value);
        s.receipts.entry(value.to_vec()).or_default().push(at);
        if first {
            if let Some(due) = reported_due {
                s.reported_due.insert(value.to_vec(), due);
            }
        }
    }

    /// A consumer call returned without a value (its timeout passed).
    pub fn empty(&self) {
        self.state().successes.push(Instant::now());
    }

    /// A call (`what`: take, receive, ack, offer...) failed.
    pub fn error(&self, what: &'static str, e: &delayq::Error) {
        self.state()
            .errors
            .push((Instant::now(), what, e.kind(), e.to_string()));
    }

    /// An offer call took `took`.
    pub fn offer_took(&self, took: Duration) {
        let mut s = self.state();
        s.offer_max = s.offer_max.max(took);
    }

    /// An ack failed or found its delivery over: the message may come back.
    pub fn ack_failed(&self) {
        self.state().acks_failed += 1;
    }

    /// How many acknowledged offers there are.
    pub fn expected_count(&self) -> usize {
        self.state().expected.len()
    }

    /// Whether every acknowledged offer was received.
    pub fn all_delivered(&self) -> bool {
        let s = self.state();
        s.expected.keys().all(|v| s.receipts.contains_key(v))
    }

    /// Whether every value in `values` was received.
    pub fn has_all(&self, values: &[Vec<u8>]) -> bool {
        let s = self.state();
        values.iter().all(|v| s.receipts.contains_key(v))
    }

    /// The first receipt at or after `t`.
    pub fn first_receipt_after(&self, t: Instant) -> Option<Instant> {
        self.state()
            .receipt_instants
            .iter()
            .copied()
            .find(|&r| r >= t)
    }

    /// The last receipt so far.
    pub fn last_receipt(&self) -> Option<Instant> {
        self.state().receipt_instants.last().copied()
    }

    /// The first successful consumer call at or after `t`.
    pub fn first_success_after(&self, t: Instant) -> Option<Instant> {
        self.state().successes.iter().copied().find(|&r| r >= t)
    }

    /// The failed calls between `from` and `to`: (instant, call, kind, message).
    pub fn errors_between(
        &self,
        from: Instant,
        to: Instant,
    ) -> Vec<(Instant, &'static str, ErrorKind, String)> {
        self.state()
            .errors
            .iter()
            .filter(|(t, ..)| *t >= from && *t <= to)
            .cloned()
            .collect()
    }

    /// Distinct error messages of failed calls, each with the call, its kind and a count.
    pub fn error_samples(&self) -> Vec<String> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (_, what, kind, msg) in &self.state().errors {
            let msg: String = msg.chars().take(160).collect();
            *seen.entry(format!("{what}: {kind}: {msg}")).or_default() += 1;
        }
        seen.into_iter().map(|(m, n)| format!("{n}x {m}")).collect()
    }

    /// The counts so far.
    pub fn summary(&self) -> Summary {
        let s = self.state();
        let tolerance = 1 + self.clock.error_us / 1000;
        let mut out = Summary {
            expected: s.expected.len(),
            unknown: s.unknown.len(),
            unexpected: s.unexpected,
            acks_failed: s.acks_failed,
            offer_max_ms: s.offer_max.as_millis(),
            ..Summary::default()
        };
        for (_, _, kind, _) in &s.errors {
            *out.errors.entry(kind.as_str().to_owned()).or_default() += 1;
        }
        for times in s.receipts.values() {
            out.duplicated += times.len() - 1;
        }
        for (value, due) in &s.expected {
            match s.receipts.get(value) {
                None => {
                    out.lost += 1;
                    if out.lost_sample.len() < 5 {
                        out.lost_sample.push(
                            String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned(),
                        );
                    }
                }
                Some(times) => {
                    out.delivered += 1;
                    out.early += times.iter().filter(|&&t| t < due.min - tolerance).count();
                    // Lateness from the due time the server reported, when it is within
                    // what the offer's round trip allows; else from the latest it can be.
                    let due_at = s
                        .reported_due
                        .get(value)
                        .copied()
                        .filter(|d| (due.min - tolerance..=due.max + tolerance).contains(d))
                        .unwrap_or(due.max);
                    let late = times[0] - due_at;
                    if out.worst_late_ms.is_none_or(|w| late > w) {
                        out.worst_late_ms = Some(late);
                        out.worst_value = Some(
                            String::from_utf8_lossy(&value[..value.len().min(24)]).into_owned(),
                        );
                    }
                }
            }
        }
        out.unknown_delivered = s
            .unknown
            .iter()
            .filter(|v| s.receipts.contains_key(*v))
            .count();
        out
    }
}

/// Prints (and returns) the one line of a scenario:
/// `fault=NAME delivered=.. lost=.. duplicated=.. early=.. worst_late_ms=.. detect_ms=..
/// recover_ms=..` followed by the other counts and `extra` fields.
pub fn report(
    fault: &str,
    s: &Summary,
    detect: Option<Duration>,
    recover: Option<Duration>,
    extra: &[(&str, String)],
) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("delivered", s.delivered.to_string()),
        ("lost", s.lost.to_string()),
        ("duplicated", s.duplicated.to_string()),
        ("early", s.early.to_string()),
        (
            "worst_late_ms",
            s.worst_late_ms
                .map_or_else(|| "na".to_owned(), |w| w.to_string()),
        ),
        ("detect_ms", crate::ms(detect)),
        ("recover_ms", crate::ms(recover)),
        ("expected", s.expected.to_string()),
        ("unknown", s.unknown.to_string()),
        ("unknown_delivered", s.unknown_delivered.to_string()),
        ("unexpected", s.unexpected.to_string()),
        ("acks_failed", s.acks_failed.to_string()),
    ];
    if s.offer_max_ms > 0 {
        fields.push(("offer_max_ms", s.offer_max_ms.to_string()));
    }
    if let Some(w) = &s.worst_value {
        fields.push(("worst", w.clone()));
    }
    if !s.errors.is_empty() {
        let errors: Vec<String> = s.errors.iter().map(|(k, n)| format!("{k}:{n}")).collect();
        fields.push(("errors", errors.join(",")));
    }
    fields.extend(extra.iter().cloned());
    report_fields(fault, &fields)
}

/// Prints (and returns) `fault=NAME k=v ...`. The line also goes to the file named by
/// `DELAYQ_FAULTS_REPORT`, if set, for scripts/test-faults.sh to gather.
pub fn report_fields(fault: &str, fields: &[(&str, String)]) -> String {
    let mut line = format!("fault={fault}");
    for (k, v) in fields {
        let _ = write!(line, " {k}={v}");
    }
    println!("{line}");
    if let Some(path) = std::env::var_os("DELAYQ_FAULTS_REPORT") {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
    line
}

/// The checks every delivery scenario makes of its counts: nothing lost, nothing early,
/// nothing unexpected; duplicates only where `dups_allowed` says (the reliable queue may
/// deliver again a message whose ack failed).
pub fn check_counts(checks: &mut crate::Checks, what: &str, s: &Summary, dups_allowed: usize) {
    checks.check(
        s.lost == 0,
        format!(
            "{what}: {} of {} acknowledged offers lost (e.g. {:?})",
            s.lost, s.expected, s.lost_sample
        ),
    );
    checks.check(
        s.early == 0,
        format!("{what}: {} deliveries before their due time", s.early),
    );
    checks.check(
        s.duplicated <= dups_allowed,
        format!(
            "{what}: {} duplicate deliveries (at most {dups_allowed} allowed: acks that failed)",
            s.duplicated
        ),
    );
    checks.check(
        s.unexpected == 0,
        format!(
            "{what}: {} values received that were never offered",
            s.unexpected
        ),
    );
}
