//! The routes (SPEC section 13) and their OpenAPI document, generated from the handlers'
//! annotations and served at `/openapi.json`.
//!
//! Payloads are bytes in core; in JSON a request gives either `payload` (a string, stored as
//! its UTF-8 bytes, or any other JSON value, stored as its JSON text) or `payload_base64`
//! (standard base64, for binary payloads), and an answer always carries `payload_base64`
//! and, when the bytes are valid UTF-8, `payload` too.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::OpenApi;

use crate::auth;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::handover::{self, HandOver};
use crate::logs::Esc;
use crate::state::{AppState, Held, Settled};
use crate::webhook::{self, WebhookRecord};

type AppStateRef = State<Arc<AppState>>;

/// The largest request body (a payload of up to 12 MiB as base64, 16 MiB as text).
pub(crate) const MAX_BODY: usize = 16 * 1024 * 1024;
/// The most deliveries one receive returns.
pub(crate) const MAX_RECEIVE_HTTP: usize = 100;
/// The longest long poll.
pub(crate) const MAX_WAIT_MS: u64 = 30_000;
/// The most dead letters one listing returns.
pub(crate) const MAX_DEAD_LIST: usize = 1000;

// The `_short` handlers are the `/dead` spelling, documented as deprecated.
#[allow(deprecated)]
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(crate::dashboard::index))
        .route("/assets/{file}", get(crate::dashboard::asset))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/v1/server", get(server_info))
        .route("/v1/queues", get(list_queues))
        .route("/v1/queues/{name}", get(get_queue))
        .route("/v1/queues/{name}/messages", post(offer))
        .route(
            "/v1/queues/{name}/messages/{id}",
            axum::routing::delete(cancel),
        )
        .route(
            "/v1/queues/{name}/messages/{id}/reschedule",
            post(reschedule),
        )
        .route(
            "/v1/queues/{name}/settings",
            get(get_settings).put(put_settings),
        )
        .route("/v1/queues/{name}/receive", post(receive))
        .route("/v1/queues/{name}/deliveries/{id}/ack", post(ack))
        .route("/v1/queues/{name}/deliveries/{id}/nack", post(nack))
        .route("/v1/queues/{name}/deliveries/{id}/extend", post(extend))
        .route(
            "/v1/queues/{name}/dead-letters",
            get(dead_letters).delete(purge_dead),
        )
        .route("/v1/queues/{name}/dead-letters/requeue", post(requeue_dead))
        .route(
            "/v1/queues/{name}/dead-letters/purge",
            post(purge_dead_post),
        )
        // The first spelling of the dead letters' routes, kept working.
        .route(
            "/v1/queues/{name}/dead",
            get(dead_letters_short).delete(purge_dead_short),
        )
        .route("/v1/queues/{name}/dead/requeue", post(requeue_dead_short))
        .route("/v1/queues/{name}/dead/purge", post(purge_dead_post_short))
        .route("/v1/delayed/{name}", get(get_delayed))
        .route("/v1/delayed/{name}/messages", post(delayed_offer))
        .route("/v1/delayed/{name}/take", post(delayed_take))
        .fallback(crate::error::no_route)
        .method_not_allowed_fallback(crate::error::wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(crate::error::json_errors))
        // Outermost: a request for another host is refused before anything else runs.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::host::guard,
        ))
        .with_state(state)
}

/// Parses a JSON body, which is an object: an empty body and `null` are `{}` (the OpenAPI
/// document declares the optional bodies nullable). Anything else that is not an object,
/// such as an array, is refused before serde sees it (serde's derived structs would take
/// `[...]` as their fields in order). Errors are 400 `invalid_argument`.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> ApiResult<T> {
    let trimmed = bytes.trim_ascii();
    let bytes: &[u8] = if trimmed.is_empty() || trimmed == b"null" {
        b"{}"
    } else {
        bytes
    };
    if !trimmed.is_empty() && trimmed[0] != b'{' && trimmed != b"null" {
        let what = match serde_json::from_slice::<serde_json::Value>(trimmed) {
            Ok(serde_json::Value::Array(_)) => "an array",
            Ok(serde_json::Value::String(_)) => "a string",
            Ok(serde_json::Value::Number(_)) => "a number",
            Ok(serde_json::Value::Bool(_)) => "a boolean",
            Ok(_) => "something else",
            Err(e) => return Err(ApiError::invalid(format!("bad JSON body: {e}"))),
        };
        return Err(ApiError::invalid(format!(
            "bad JSON body: it is {what}; a body is a JSON object of named fields (or empty)"
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(format!("bad JSON body: {e}")))
}

/// The body of a route that takes none, checked by [`no_body`]: a name of its own, since
/// utoipa documents an argument of type `Bytes` as a binary request body.
type UnwantedBody = Bytes;

/// The body of a route that takes none: empty, `{}` or `null`. Any other is a 400 and the
/// route does nothing (a field sent there would be ignored, and the request may not mean
/// what the client thinks).
fn no_body(bytes: &Bytes) -> ApiResult<()> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Nothing {}
    body::<Nothing>(bytes).map(|_| ()).map_err(|e| {
        ApiError::invalid(format!(
            "this route takes no body (send none, {{}} or null): {}",
            e.message
        ))
    })
}

/// The bytes of a request's `payload`: a JSON string's UTF-8 bytes, or the JSON text of
/// any other value as the request wrote it, less the whitespace between its tokens
/// (`{"order": 42}` is stored as `{"order":42}`; key order, repeated keys and the digits
/// of numbers are kept, since a receiver may hash or sign them); null is none.
fn payload_text(payload: Option<Box<RawValue>>) -> ApiResult<Option<Vec<u8>>> {
    let Some(raw) = payload else { return Ok(None) };
    let text = raw.get();
    if text.starts_with('"') {
        let s: String = serde_json::from_str(text)
            .map_err(|e| ApiError::invalid(format!("payload is not valid JSON: {e}")))?;
        return Ok(Some(s.into_bytes()));
    }
    // RawValue checks the grammar only: a lone surrogate escape is refused as before.
    serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| ApiError::invalid(format!("payload is not valid JSON: {e}")))?;
    Ok(Some(compact(text).into_bytes()))
}

/// `json` without the whitespace between its tokens (strings are kept as they are).
fn compact(json: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::with_capacity(json.len()), false, false);
    for c in json.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        } else {
            in_string = c == '"';
        }
        out.push(c);
    }
    out
}

fn payload_of(payload: Option<Box<RawValue>>, b64: Option<String>) -> ApiResult<Vec<u8>> {
    let bytes = match (payload_text(payload)?, b64) {
        (Some(t), None) => t,
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.trim())
            .map_err(|e| ApiError::invalid(format!("payload_base64 is not base64: {e}")))?,
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "give payload or payload_base64, not both",
            ))
        }
        (None, None) => return Err(ApiError::invalid("payload or payload_base64 is required")),
    };
    delayq::delay::check_value(&bytes)?;
    Ok(bytes)
}

fn delay_of(ms: u64) -> ApiResult<Duration> {
    let d = Duration::from_millis(ms);
    delayq::delay::delay_to_millis(d)?;
    Ok(d)
}

fn check_id(id: &str) -> ApiResult<()> {
    if id.is_empty() || id.len() > delayq::MAX_ID_LEN {
        return Err(ApiError::invalid(format!(
            "a message id is 1 to {} bytes of UTF-8",
            delayq::MAX_ID_LEN
        )));
    }
    Ok(())
}

/// A payload in an answer.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Payload {
    /// The payload as text, when it is valid UTF-8.
    payload: Option<String>,
    /// The payload as standard base64.
    payload_base64: String,
}

impl Payload {
    fn of(bytes: &[u8]) -> Self {
        Payload {
            payload: std::str::from_utf8(bytes).ok().map(str::to_owned),
            payload_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

// ---------------------------------------------------------------- server, listing

/// What the dashboard needs to know about the service.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ServerInfo {
    version: &'static str,
    /// Mutating routes are refused (no token configured, no `--allow-unauthenticated`).
    read_only: bool,
    /// Mutating routes need `Authorization: Bearer <token>`.
    token_required: bool,
    /// This process delivers webhooks.
    webhooks: bool,
    /// Webhook signatures can be verified: they are keyed with `DELAYQ_WEBHOOK_SECRET`.
    /// False: it is not set, and requests are signed with a random key of this process,
    /// which no endpoint knows (so endpoints cannot tell them from forgeries).
    webhook_signing: bool,
    /// The Redis server's clock (Unix ms), as estimated by the service.
    server_time: i64,
}

#[utoipa::path(get, path = "/v1/server", tag = "service",
    responses((status = 200, body = ServerInfo)))]
async fn server_info(State(state): AppStateRef) -> Json<ServerInfo> {
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION"),
        read_only: state.config.is_read_only(),
        token_required: state.config.token.is_some(),
        webhooks: state.config.webhooks,
        webhook_signing: state.config.webhook_secret.is_some(),
        server_time: state.server_now_ms(),
    })
}

#[utoipa::path(get, path = "/openapi.json", tag = "service",
    responses((status = 200, description = "This document", body = Object, content_type = "application/json")))]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Counts of a reliable queue in Redis.
#[derive(Serialize, utoipa::ToSchema, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) delayed: u64,
    pub(crate) ready: u64,
    pub(crate) in_flight: u64,
    pub(crate) dead: u64,
}

/// What this server process counted for a queue since it started (core's
/// `delayq::metrics`); rates are their differences over time.
#[derive(Serialize, utoipa::ToSchema, Default)]
pub(crate) struct Totals {
    offered: u64,
    delivered: u64,
    acked: u64,
    nacked: u64,
    dead: u64,
    /// Lateness histogram: `[upper bound in seconds, count at or below]`, cumulative.
    lateness_buckets: Vec<(f64, u64)>,
    lateness_count: u64,
    lateness_sum_seconds: f64,
}

fn totals(kind: delayq::metrics::QueueKind, name: &str) -> Totals {
    let m = delayq::metrics::queue(kind, name);
    Totals {
        offered: m.offered,
        delivered: m.delivered,
        acked: m.acked,
        nacked: m.nacked,
        dead: m.dead,
        lateness_buckets: m.lateness.buckets,
        lateness_count: m.lateness.count,
        lateness_sum_seconds: m.lateness.sum_seconds,
    }
}

/// A reliable queue in the listing.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct QueueSummary {
    name: String,
    counts: Option<Counts>,
    totals: Totals,
    /// Why the counts could not be read.
    error: Option<String>,
}

/// Counts of a delayed (Redisson-compatible) queue in Redis.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DelayedCounts {
    pub(crate) delayed: u64,
    pub(crate) ready: u64,
    pub(crate) corrupt: u64,
}

/// A delayed queue in the listing.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DelayedSummary {
    name: String,
    counts: Option<DelayedCounts>,
    totals: Totals,
    error: Option<String>,
}

/// Every queue the service knows: found by `SCAN` (every 30 s), named with `--queue` /
/// `--delayed-queue`, or used through it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct QueueList {
    reliable: Vec<QueueSummary>,
    delayed: Vec<DelayedSummary>,
    /// The Redis server's clock (Unix ms), as estimated by the service.
    server_time: i64,
}

pub(crate) async fn reliable_counts(state: &AppState, name: &str) -> Result<Counts, String> {
    let q = state.reliable_read(name).map_err(|e| e.to_string())?;
    let s = q.stats().await.map_err(|e| e.to_string())?;
    Ok(Counts {
        delayed: s.delayed,
        ready: s.ready,
        in_flight: s.in_flight,
        dead: s.dead,
    })
}

pub(crate) async fn delayed_counts(state: &AppState, name: &str) -> Result<DelayedCounts, String> {
    let q = state.delayed_read(name).map_err(|e| e.to_string())?;
    let s = q.stats().await.map_err(|e| e.to_string())?;
    Ok(DelayedCounts {
        delayed: s.delayed,
        ready: s.ready,
        corrupt: s.corrupt,
    })
}

pub(crate) async fn gather(state: &AppState) -> QueueList {
    use delayq::metrics::QueueKind;
    let (reliable, delayed) = state.known();
    let r = futures_util::future::join_all(reliable.into_iter().map(|name| async move {
        let c = reliable_counts(state, &name).await;
        QueueSummary {
            totals: totals(QueueKind::Reliable, &name),
            counts: c.as_ref().ok().copied(),
            error: c.err(),
            name,
        }
    }));
    let d = futures_util::future::join_all(delayed.into_iter().map(|name| async move {
        let c = delayed_counts(state, &name).await;
        DelayedSummary {
            totals: totals(QueueKind::Delayed, &name),
            error: c.as_ref().err().cloned(),
            counts: c.ok(),
            name,
        }
    }));
    let (reliable, delayed) = futures_util::join!(r, d);
    QueueList {
        reliable,
        delayed,
        server_time: state.server_now_ms(),
    }
}

#[utoipa::path(get, path = "/v1/queues", tag = "queues",
    responses((status = 200, body = QueueList)))]
async fn list_queues(State(state): AppStateRef) -> Json<QueueList> {
    Json(gather(&state).await)
}

// ---------------------------------------------------------------- reliable queue

/// The settings of a reliable queue, as stored with it in Redis.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Settings {
    visibility_timeout_ms: u64,
    max_attempts: u32,
    /// `exponential BASE_MS MAX_MS` or `schedule MS MS ...`.
    backoff: String,
    shards: u32,
    /// None: dead letters are kept until requeued or purged.
    dead_letter_retention_ms: Option<u64>,
    /// None: acked ids are forgotten at once.
    idempotency_retention_ms: Option<u64>,
}

fn settings_json(s: &delayq::ReliableSettings) -> Settings {
    let backoff = match &s.backoff {
        delayq::Backoff::Exponential { base, max } => {
            format!("exponential {} {}", base.as_millis(), max.as_millis())
        }
        delayq::Backoff::Schedule(d) => {
            let mut t = "schedule".to_owned();
            for d in d {
                t.push_str(&format!(" {}", d.as_millis()));
            }
            t
        }
    };
    Settings {
        visibility_timeout_ms: s.visibility_timeout.as_millis() as u64,
        max_attempts: s.max_attempts,
        backoff,
        shards: s.shards,
        dead_letter_retention_ms: s.dead_letter_retention.map(|d| d.as_millis() as u64),
        idempotency_retention_ms: s.idempotency_retention.map(|d| d.as_millis() as u64),
    }
}

/// A reliable queue: its stored settings and counts.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct QueueInfo {
    name: String,
    settings: Settings,
    counts: Counts,
    /// What this server process counted for it.
    totals: Totals,
}

#[utoipa::path(get, path = "/v1/queues/{name}", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses((status = 200, body = QueueInfo), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn get_queue(
    State(state): AppStateRef,
    Path(name): Path<String>,
) -> ApiResult<Json<QueueInfo>> {
    let q = state.reliable_read(&name)?;
    let settings = q.settings().await?;
    let s = q.stats().await?;
    Ok(Json(QueueInfo {
        settings: settings_json(&settings),
        counts: Counts {
            delayed: s.delayed,
            ready: s.ready,
            in_flight: s.in_flight,
            dead: s.dead,
        },
        totals: totals(delayq::metrics::QueueKind::Reliable, &name),
        name,
    }))
}

/// The stored settings of a reliable queue (the `settings` of `GET /v1/queues/{name}`).
#[utoipa::path(get, path = "/v1/queues/{name}/settings", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses((status = 200, body = Settings, description = "The stored settings (the defaults when none are stored)"),
        (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn get_settings(
    State(state): AppStateRef,
    Path(name): Path<String>,
) -> ApiResult<Json<Settings>> {
    let q = state.reliable_read(&name)?;
    Ok(Json(settings_json(&q.settings().await?)))
}

/// Serde: a field given, even as `null`, is `Some` (`Some(None)` for `null`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The settings to store for a reliable queue; each one left out keeps its stored value (a
/// queue without stored settings gets the defaults for the rest). Durations in ms. Name at
/// least one. The answer of `GET /v1/queues/{name}/settings` is accepted as it is.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettingsRequest {
    /// The lease of a received message (at least 1; default 30000). Also accepted as
    /// `visibility_ms`.
    #[serde(alias = "visibility_ms")]
    #[schema(minimum = 1, maximum = 1125899906842624_u64)]
    visibility_timeout_ms: Option<u64>,
    /// Deliveries before a message becomes a dead letter (1 to 255; default 5).
    #[schema(minimum = 1, maximum = 255)]
    max_attempts: Option<u32>,
    /// A back-off schedule: the delay after the 1st, 2nd, ... failed attempt (the last one
    /// repeats). Not with `backoff_base_ms`/`backoff_max_ms`.
    backoff_ms: Option<Vec<u64>>,
    /// An exponential back-off (with jitter): the delay after the first failed attempt
    /// (default 1000; the other part left out takes its default).
    backoff_base_ms: Option<u64>,
    /// An exponential back-off: the longest delay (default 600000).
    backoff_max_ms: Option<u64>,
    /// The back-off as the answer writes it: `exponential BASE_MS MAX_MS` or
    /// `schedule MS MS ...` (the command line's `exponential:BASE_MS:MAX_MS` and
    /// `schedule:MS,MS,...` too). Not with the `backoff_*` fields.
    backoff: Option<String>,
    /// Sub-queues: a power of two, 1 to 1024 (see docs/cluster.md). Refused while the
    /// queue holds messages.
    #[schema(minimum = 1, maximum = 1024)]
    shards: Option<u32>,
    /// How long dead letters are kept; 0 or `null`: until requeued or purged.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    dead_letter_retention_ms: Option<Option<u64>>,
    /// How long acked ids are remembered, so that an offer of the same id creates nothing;
    /// 0 or `null`: not at all.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    idempotency_retention_ms: Option<Option<u64>>,
}

/// The settable names, for the error of a request that names none.
const SETTINGS_FIELDS: &str = "visibility_timeout_ms, max_attempts, backoff_ms, backoff_base_ms, \
     backoff_max_ms, backoff, shards, dead_letter_retention_ms, idempotency_retention_ms";

/// A back-off as [`Settings::backoff`] writes it, or as the command line does.
fn parse_backoff(text: &str) -> ApiResult<delayq::Backoff> {
    let bad = || {
        ApiError::invalid(format!(
            "backoff {text:?} is not `exponential BASE_MS MAX_MS` or `schedule MS MS ...`"
        ))
    };
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let (kind, nums) = words.split_first().ok_or_else(bad)?;
    let nums = nums
        .iter()
        .map(|w| w.parse::<u64>().map(Duration::from_millis))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad())?;
    match (*kind, nums.as_slice()) {
        ("exponential", [base, max]) => Ok(delayq::Backoff::Exponential {
            base: *base,
            max: *max,
        }),
        ("schedule", [_, ..]) => Ok(delayq::Backoff::Schedule(nums)),
        _ => Err(bad()),
    }
}

impl SettingsRequest {
    /// Core's options naming these settings, to be stored (`update_settings`), for a
    /// handle without a transfer task.
    fn options(self) -> ApiResult<delayq::ReliableQueueOptions> {
        let ms = Duration::from_millis;
        let parts = delayq::Backoff::from_parts(
            self.backoff_ms.map(|v| v.into_iter().map(ms).collect()),
            self.backoff_base_ms.map(ms),
            self.backoff_max_ms.map(ms),
        )?;
        let backoff = match (self.backoff, parts) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "give backoff or backoff_ms / backoff_base_ms / backoff_max_ms, not both",
                ))
            }
            (Some(text), None) => Some(parse_backoff(&text)?),
            (None, parts) => parts,
        };
        // Null is 0: off.
        let retention = |r: Option<Option<u64>>| r.map(|r| ms(r.unwrap_or(0)));
        let opts = delayq::ReliableQueueOptions {
            visibility_timeout: self.visibility_timeout_ms.map(ms),
            max_attempts: self.max_attempts,
            backoff,
            shards: self.shards,
            dead_letter_retention: retention(self.dead_letter_retention_ms),
            idempotency_retention: retention(self.idempotency_retention_ms),
            update_settings: true,
            scheduler: crate::state::no_scheduler(),
        };
        let named = opts.visibility_timeout.is_some()
            || opts.max_attempts.is_some()
            || opts.backoff.is_some()
            || opts.shards.is_some()
            || opts.dead_letter_retention.is_some()
            || opts.idempotency_retention.is_some();
        if !named {
            return Err(ApiError::invalid(format!(
                "name at least one setting: {SETTINGS_FIELDS}"
            )));
        }
        Ok(opts)
    }
}

/// Store settings of a reliable queue.
///
/// Through core (as `delayq reliable configure` does): every handle in every process uses
/// them. The settings left out keep their stored values. A bad value, or a change of
/// `shards` while the queue holds messages, is a 400 `invalid_argument` and stores nothing.
#[utoipa::path(put, path = "/v1/queues/{name}/settings", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    request_body = SettingsRequest, security(("bearer" = [])),
    responses((status = 200, body = Settings, description = "The settings now stored, as `GET /v1/queues/{name}` shows them"),
        (status = 400, body = ErrorBody, description = "A bad value (core's `invalid_argument`): nothing was stored"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn put_settings(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<Settings>> {
    auth::check(&state, &headers)?;
    let req: SettingsRequest = body(&raw)?;
    let opts = req.options()?;
    // Core checks every value when the handle is made, before anything reaches Redis, and
    // refuses a change of shards while the queue holds messages before storing anything.
    let shards = opts.shards;
    let q = state.client.reliable_queue(&name, opts)?;
    let shards_before = match shards {
        Some(_) => Some(state.reliable_read(&name)?.settings().await?.shards),
        None => None,
    };
    let stored = q.settings().await;
    q.close();
    let stored = stored?;
    if shards_before.is_some_and(|before| before != stored.shards) {
        // This process's handle (and its webhook workers') keeps the layout it read.
        state.renew_reliable(&name);
    }
    state.saw(true, &name);
    Ok(Json(settings_json(&stored)))
}

/// A message to offer. Give `payload` or `payload_base64`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OfferRequest {
    /// The payload: a string (its UTF-8 bytes are stored), or any other JSON value (stored
    /// as its JSON text without whitespace between tokens, which answers and webhooks
    /// give back).
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<RawValue>>,
    /// The payload as standard base64 (binary payloads).
    payload_base64: Option<String>,
    /// Delay before it is due, in ms (default 0; at most 2^50).
    #[serde(default)]
    #[schema(maximum = 1125899906842624_u64)]
    delay_ms: u64,
    /// Your id (1 to 256 bytes): an offer with an id still waiting or in flight creates
    /// nothing (`created: false`). Default: a generated one. (The schema can bound its
    /// characters only; the service refuses more than 256 UTF-8 bytes.)
    #[schema(min_length = 1, max_length = 256)]
    id: Option<String>,
    /// POST the message to this http(s) URL when due (see docs/serve.md, webhooks). A queue
    /// holds either messages with a `callback_url` (a webhook queue) or messages without;
    /// the first offer to an empty queue decides which (409 `conflict` otherwise). The id
    /// and the queue's name then go in request headers: one with a control character or
    /// a space at its start or end is refused (400).
    callback_url: Option<String>,
}

/// What an offer did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct OfferResponse {
    id: String,
    /// False when a message with this id was already there (nothing changed).
    created: bool,
    /// When it is due (Unix ms, as the Redis server computed it); null for a
    /// de-duplicated offer (the existing message keeps its own due time).
    due_at: Option<i64>,
}

#[utoipa::path(post, path = "/v1/queues/{name}/messages", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    request_body = OfferRequest, security(("bearer" = [])),
    responses((status = 201, body = OfferResponse, description = "Created"),
        (status = 200, body = OfferResponse, description = "De-duplicated by id"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`wrong_type`: a key of the queue holds another Redis type; `conflict`: the offer would put webhook and plain messages in one queue (with `callback_url` to a queue that is no webhook queue and holds messages, or without it to a webhook queue that holds messages; the first offer to an empty queue decides its kind). Nothing was stored"),
        (status = 503, body = ErrorBody)))]
async fn offer(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<(StatusCode, Json<OfferResponse>)> {
    auth::check(&state, &headers)?;
    let req: OfferRequest = body(&raw)?;
    let payload = payload_of(req.payload, req.payload_base64)?;
    let delay = delay_of(req.delay_ms)?;
    if let Some(id) = &req.id {
        check_id(id)?;
    }
    let callback = match &req.callback_url {
        Some(u) => {
            let url =
                url::Url::parse(u).map_err(|e| ApiError::invalid(format!("callback_url: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                return Err(ApiError::invalid(
                    "callback_url must be an http or https URL",
                ));
            }
            // The queue name and the id travel in headers of every request.
            webhook::check_header_value("the queue name", webhook::QUEUE_HEADER, &name)
                .map_err(ApiError::invalid)?;
            if let Some(id) = &req.id {
                webhook::check_header_value("the id", webhook::ID_HEADER, id)
                    .map_err(ApiError::invalid)?;
            }
            Some(url.to_string())
        }
        None => None,
    };
    let mut q = state.reliable(&name)?;
    // The queue's kind (webhook queue or not) fits this offer, or is changed while it
    // holds nothing; the offer is made under the lock of the kind, so that no offer of
    // this process changes the kind between its check and its message.
    let kind_lock = state.webhooks.kind_lock(&name);
    let mut shared = Some(kind_lock.read().await);
    let mut exclusive = None;
    let webhook = callback.is_some();
    // A change of kind taken back when the offer is refused: the queue was (true) or was
    // not (false) a webhook queue before.
    let mut undo = None;
    if state.webhooks.is_registered(&state, &name).await? != webhook {
        shared = None;
        exclusive = Some(kind_lock.write().await);
        let registered = state.webhooks.is_registered(&state, &name).await?;
        if registered != webhook {
            check_kind_change(&q, &name, webhook).await?;
            let changed = if webhook {
                state.webhooks.add(&state, &name).await?
            } else {
                state.webhooks.remove(&state, &name).await?
            };
            if changed {
                undo = Some(registered);
            }
        }
    }
    // A message for a webhook gets its id here, so that its record is written before the
    // message exists (a delay of 0 could otherwise reach a worker first).
    let id = match (&req.id, &callback) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(_)) => Some(format!("wh-{:032x}", delayq::random::random::<u128>())),
        (None, None) => None,
    };
    // The record is written before the offer only where none is, and taken back when the
    // offer is refused (not when its reply was lost), so that it leaves nothing behind; an id that had one (a
    // de-duplicated offer, or a dead letter's id) gets this URL once the offer succeeded.
    let mut wrote = false;
    if let (Some(url), Some(id)) = (&callback, &id) {
        wrote = state.webhooks.record(&state, &name, id, url, false).await?;
    }
    let outcome = q.offer_with_outcome(payload, delay, id.as_deref()).await;
    if let (Err(e), Some(was)) = (&outcome, undo) {
        // Refused (not a reply lost, when the message may be stored): the queue's kind is
        // what it was.
        if !matches!(
            e.kind(),
            delayq::ErrorKind::Connection | delayq::ErrorKind::Timeout
        ) {
            let _ = if was {
                state.webhooks.add(&state, &name).await
            } else {
                state.webhooks.remove(&state, &name).await
            };
        }
    }
    if let (Some(url), Some(id)) = (&callback, &id) {
        match &outcome {
            Ok(_) => {
                if !wrote {
                    state.webhooks.record(&state, &name, id, url, true).await?;
                }
                state.webhooks.register(&state, &name).await?;
            }
            // A reply lost: the message may be stored, and keeps its record.
            Err(e)
                if matches!(
                    e.kind(),
                    delayq::ErrorKind::Connection | delayq::ErrorKind::Timeout
                ) =>
            {
                if wrote {
                    let _ = state.webhooks.register(&state, &name).await;
                }
            }
            Err(_) if wrote => state.webhooks.forget(&state, &name, id).await,
            Err(_) => {}
        }
    }
    drop((shared, exclusive));
    let outcome = outcome?;
    q.succeeded();
    state.saw(true, &name);
    let status = if outcome.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(OfferResponse {
            id: outcome.id,
            created: outcome.created,
            due_at: outcome.due_at,
        }),
    ))
}

/// Refuses (409 `conflict`) to make queue `name` a webhook queue (`webhook`) or a plain one
/// while it holds messages: a queue's messages all go to webhooks or all to receive.
async fn check_kind_change(q: &delayq::ReliableQueue, name: &str, webhook: bool) -> ApiResult<()> {
    let s = q.stats().await?;
    let held = s.delayed + s.ready + s.in_flight + s.dead;
    if held == 0 {
        return Ok(());
    }
    let counts = format!(
        "{held} message(s): {} delayed, {} ready, {} in flight, {} dead",
        s.delayed, s.ready, s.in_flight, s.dead
    );
    Err(ApiError::conflict(if webhook {
        format!(
            "queue {name:?} is not a webhook queue and holds {counts}, offered without \
             callback_url, which receive hands out: a queue's messages all go to webhooks or \
             all to receive, so offer messages with callback_url to a queue of their own (one \
             that holds nothing yet), or to this one once it holds nothing (dead letters \
             included); nothing was stored"
        )
    } else {
        format!(
            "queue {name:?} is a webhook queue (its messages are POSTed to their callback_url) \
             and holds {counts}: a message without callback_url there would end in the dead \
             letters, so give it a callback_url or offer it to another queue; a webhook queue \
             becomes a plain one again when an offer without callback_url finds it holding \
             nothing (dead letters included); nothing was stored"
        )
    }))
}

/// A message was cancelled.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct CancelResponse {
    cancelled: bool,
}

#[utoipa::path(delete, path = "/v1/queues/{name}/messages/{id}", tag = "queues",
    params(("name" = String, Path), ("id" = String, Path, description = "Message id")),
    security(("bearer" = [])),
    responses((status = 200, body = CancelResponse),
        (status = 404, body = ErrorBody, description = "No waiting message with this id"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn cancel(
    State(state): AppStateRef,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<CancelResponse>> {
    auth::check(&state, &headers)?;
    no_body(&raw)?;
    check_id(&id)?;
    let mut q = state.reliable(&name)?;
    if !q.cancel(&id).await? {
        return Err(ApiError::not_found(format!(
            "no message {id:?} waiting in queue {name:?} (received, done, or never offered)"
        )));
    }
    q.succeeded();
    state.saw(true, &name);
    let _ = state
        .client
        .query::<i64>(redis::cmd("HDEL").arg(webhook::record_key(&name)).arg(&id))
        .await;
    Ok(Json(CancelResponse { cancelled: true }))
}

/// A new delay for a waiting message.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RescheduleRequest {
    /// Due this many ms from now (at most 2^50).
    #[schema(maximum = 1125899906842624_u64)]
    delay_ms: u64,
}

/// A message was rescheduled.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RescheduleResponse {
    rescheduled: bool,
    /// The new due time (Unix ms, as the Redis server computed it).
    due_at: i64,
}

#[utoipa::path(post, path = "/v1/queues/{name}/messages/{id}/reschedule", tag = "queues",
    params(("name" = String, Path), ("id" = String, Path, description = "Message id")),
    request_body = RescheduleRequest, security(("bearer" = [])),
    responses((status = 200, body = RescheduleResponse),
        (status = 404, body = ErrorBody, description = "No waiting message with this id"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn reschedule(
    State(state): AppStateRef,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<RescheduleResponse>> {
    auth::check(&state, &headers)?;
    let req: RescheduleRequest = body(&raw)?;
    check_id(&id)?;
    let delay = delay_of(req.delay_ms)?;
    let mut q = state.reliable(&name)?;
    let Some(due_at) = q.reschedule_due_at(&id, delay).await? else {
        return Err(ApiError::not_found(format!(
            "no message {id:?} waiting in queue {name:?}"
        )));
    };
    q.succeeded();
    state.saw(true, &name);
    Ok(Json(RescheduleResponse {
        rescheduled: true,
        due_at,
    }))
}

/// A long poll for ready messages.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReceiveRequest {
    /// At most this many deliveries (1 to 100, default 1). Also accepted as `n`, `count`,
    /// `limit` or `max_messages` (listed as deprecated properties).
    #[serde(alias = "n", alias = "count", alias = "limit", alias = "max_messages")]
    #[schema(minimum = 1, maximum = 100)]
    max: Option<usize>,
    /// Wait up to this many ms for the first (0 to 30000, default 0: answer at once).
    /// Also accepted as `timeout_ms`.
    #[serde(alias = "timeout_ms")]
    #[schema(maximum = 30000)]
    wait_ms: Option<u64>,
}

/// A message received: ack, nack or extend it by `delivery_id` (or by its message `id`)
/// before `deadline`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DeliveryJson {
    /// Names this delivery in `/deliveries/{id}/...` (on this service process).
    delivery_id: String,
    /// The message id; `/deliveries/{id}/...` takes it too (its latest delivery here).
    id: String,
    #[serde(flatten)]
    payload: Payload,
    /// 1 for the first delivery.
    attempt: u32,
    /// When the message came due (Unix ms, server clock).
    due_at: i64,
    /// When the lease ends (Unix ms, server clock): after it, the message is delivered again.
    deadline: i64,
}

/// Deliveries (an empty list when none came within `wait_ms`).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ReceiveResponse {
    deliveries: Vec<DeliveryJson>,
}

#[utoipa::path(post, path = "/v1/queues/{name}/receive", tag = "deliveries",
    params(("name" = String, Path)), request_body = Option<ReceiveRequest>, security(("bearer" = [])),
    responses((status = 200, body = ReceiveResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`conflict`: a webhook queue, whose messages go to their `callback_url`; `wrong_type`: a key of the queue holds another Redis type"),
        (status = 503, body = ErrorBody)))]
async fn receive(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Response> {
    auth::check(&state, &headers)?;
    let req: ReceiveRequest = body(&raw)?;
    let max = req.max.unwrap_or(1);
    if !(1..=MAX_RECEIVE_HTTP).contains(&max) {
        return Err(ApiError::invalid(format!("max is 1 to {MAX_RECEIVE_HTTP}")));
    }
    let wait = req.wait_ms.unwrap_or(0);
    if wait > MAX_WAIT_MS {
        return Err(ApiError::invalid(format!("wait_ms is 0 to {MAX_WAIT_MS}")));
    }
    if state.webhooks.is_registered(&state, &name).await? {
        return Err(ApiError::conflict(format!(
            "queue {name:?} is a webhook queue: its messages are POSTed to their callback_url \
             by the service's webhook workers, not handed out by receive; it becomes a plain \
             queue again when an offer without callback_url finds it holding nothing (dead \
             letters included)"
        )));
    }
    let mut q = state.reliable(&name)?;
    // If the client goes away mid-wait, this future is dropped and core gives back what
    // the server was handing over (receive is cancel-safe). When the service stops, the
    // wait ends at once the same way, and the answer is an empty list.
    let got = tokio::select! {
        biased;
        got = q.receive_many(max, Some(Duration::from_millis(wait))) => got?,
        _ = state.stop.cancelled() => Vec::new(),
    };
    q.succeeded();
    state.saw(true, &name);
    // The answer's payloads are made outside the lock; the deliveries held keep none (acks,
    // nacks and extends need only their receipts), so that copying one is cheap.
    let mut kept = Vec::with_capacity(got.len());
    let deliveries = got
        .into_iter()
        .map(|mut d| {
            let delivery_id = format!("{:032x}", delayq::random::random::<u128>());
            let json = DeliveryJson {
                delivery_id: delivery_id.clone(),
                id: d.id.clone(),
                payload: Payload::of(&std::mem::take(&mut d.payload)),
                attempt: d.attempt,
                due_at: d.due_at,
                deadline: d.deadline(),
            };
            kept.push((delivery_id, d));
            json
        })
        .collect::<Vec<DeliveryJson>>();
    let mut held = state.held.lock().unwrap();
    for (delivery_id, d) in kept {
        let seq = state
            .held_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let settled = Default::default();
        let (queue, delivery) = (name.clone(), d);
        held.insert(
            delivery_id,
            Held {
                queue,
                delivery,
                seq,
                settled,
            },
        );
    }
    drop(held);
    if deliveries.is_empty() {
        return Ok(Json(ReceiveResponse { deliveries }).into_response());
    }
    // An answer that is never written gives its deliveries back at once (ready again, the
    // attempt not counted) rather than leaving them to their lease.
    let ids: Vec<String> = deliveries.iter().map(|d| d.delivery_id.clone()).collect();
    let owner = state.clone();
    let give_back = move || {
        handover::spawn(async move {
            for id in ids {
                let Some(h) = owner.held.lock().unwrap().remove(&id) else {
                    continue;
                };
                if let Err(e) = h.delivery.release().await {
                    tracing::warn!(queue = ?h.queue, error = %Esc(&e), "could not give back a delivery whose answer was not sent; it returns after its lease");
                }
            }
        })
    };
    Ok(HandOver::json(&ReceiveResponse { deliveries }, give_back))
}

/// The delivery of queue `name` that `key` names: `key` is a
/// `delivery_id` this process handed out, or else a message id, whose latest delivery held
/// here is meant (an earlier one may still be held when its lease ended and the message
/// came again).
fn held(state: &AppState, name: &str, key: &str) -> ApiResult<HeldDelivery> {
    let map = state.held.lock().unwrap();
    let found = |h: &Held| HeldDelivery {
        delivery: h.delivery.clone(),
        settled: h.settled.clone(),
    };
    if let Some(h) = map.get(key).filter(|h| h.queue == name) {
        return Ok(found(h));
    }
    map.latest(name, key)
        .map(found)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no delivery {key:?} of queue {name:?} on this service: neither a delivery_id nor the id of a message received here (or forgotten {} s after its lease ended)",
                crate::state::FORGET_AFTER.as_secs()
            ))
        })
}

/// A delivery held here, as an ack, nack or extend finds it.
struct HeldDelivery {
    delivery: delayq::Delivery,
    settled: Arc<tokio::sync::OnceCell<(Settled, std::time::Instant)>>,
}

impl HeldDelivery {
    /// How the first ack or nack settled this delivery: `call`'s outcome when it is the
    /// first, else (waiting for a first one still running) that one's. A first call that
    /// failed settles nothing, so the next one tries again. It runs as a task of its own:
    /// a client that goes away (a timeout, before a retry) does not cancel it, so that
    /// what Redis did is recorded for the retry.
    async fn settle<F>(&self, call: F) -> ApiResult<Settled>
    where
        F: std::future::Future<Output = delayq::Result<Settled>> + Send + 'static,
    {
        let cell = self.settled.clone();
        let settling = tokio::spawn(async move {
            let first = cell.get_or_try_init(|| async {
                Ok::<_, delayq::Error>((call.await?, std::time::Instant::now()))
            });
            first.await.map(|(how, _)| *how)
        });
        let settled = settling
            .await
            .map_err(|e| delayq::Error::Server(e.to_string()))?;
        Ok(settled?)
    }
}

/// The path parameter of the deliveries' routes.
const DELIVERY_PARAM: &str = "The receive answer's `delivery_id`, or the message `id` (then the latest delivery of that message received from this service process)";

/// Whether an ack found the lease still held.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct AckResponse {
    /// False: the lease had ended (the message may be processed again elsewhere).
    acked: bool,
}

/// Ack a delivery: the message is done.
///
/// `{id}` is the receive answer's `delivery_id`, or the message `id`: then the latest
/// delivery of that message received from this service process (an earlier one is still
/// held when its lease ended and the message came again). An ack or nack of a delivery
/// that was acked or nacked in the last 60 s (a retry whose first answer was lost, or one
/// sent while the first was running) gets the first one's answer and changes nothing.
#[utoipa::path(post, path = "/v1/queues/{name}/deliveries/{id}/ack", tag = "deliveries",
    params(("name" = String, Path), ("id" = String, Path, description = DELIVERY_PARAM)), security(("bearer" = [])),
    responses((status = 200, body = AckResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn ack(
    State(state): AppStateRef,
    Path((name, key)): Path<(String, String)>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<AckResponse>> {
    auth::check(&state, &headers)?;
    no_body(&raw)?;
    let h = held(&state, &name, &key)?;
    // A retried ack answers as the first did; an ack after a nack finds no lease.
    let d = h.delivery.clone();
    let first = async move { Ok(Settled::Acked(d.ack().await?)) };
    let acked = match h.settle(first).await? {
        Settled::Acked(acked) => acked,
        Settled::Nacked(_) => false,
    };
    Ok(Json(AckResponse { acked }))
}

/// A nack: retry after `delay_ms`, or after the queue's back-off when absent.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct NackRequest {
    /// Retry this many ms from now (at most 2^50); absent: after the queue's back-off.
    #[schema(maximum = 1125899906842624_u64)]
    delay_ms: Option<u64>,
}

/// Whether a nack found the lease still held.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct NackResponse {
    nacked: bool,
}

/// Nack a delivery: the message is retried (or buried after its last attempt).
///
/// `{id}` is the receive answer's `delivery_id`, or the message `id` (its latest delivery
/// received from this service process). A retry within 60 s of the first ack or nack gets
/// the first one's answer (a nack after an ack: `false`) and changes nothing.
#[utoipa::path(post, path = "/v1/queues/{name}/deliveries/{id}/nack", tag = "deliveries",
    params(("name" = String, Path), ("id" = String, Path, description = DELIVERY_PARAM)),
    request_body = Option<NackRequest>, security(("bearer" = [])),
    responses((status = 200, body = NackResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn nack(
    State(state): AppStateRef,
    Path((name, key)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<NackResponse>> {
    auth::check(&state, &headers)?;
    let req: NackRequest = body(&raw)?;
    let delay = req.delay_ms.map(delay_of).transpose()?;
    let h = held(&state, &name, &key)?;
    // A retried nack answers as the first did; a nack after an ack finds no lease.
    let d = h.delivery.clone();
    let first = async move { Ok(Settled::Nacked(d.nack(delay).await?)) };
    let nacked = match h.settle(first).await? {
        Settled::Nacked(nacked) => nacked,
        Settled::Acked(_) => false,
    };
    Ok(Json(NackResponse { nacked }))
}

/// A new end of the lease, `duration_ms` from now.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtendRequest {
    /// The lease ends this many ms from now (not from its current end). Also accepted as
    /// `ms` or `visibility_timeout_ms` (SQS's ChangeMessageVisibility means the same).
    #[serde(alias = "ms", alias = "visibility_timeout_ms")]
    #[schema(maximum = 1125899906842624_u64)]
    duration_ms: u64,
}

/// Whether the lease was still held, and its new end.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ExtendResponse {
    extended: bool,
    deadline: i64,
}

/// Extend a delivery's lease to `duration_ms` from now.
///
/// `{id}` is the receive answer's `delivery_id`, or the message `id` (its latest delivery
/// received from this service process). An acked or nacked delivery answers `false`.
#[utoipa::path(post, path = "/v1/queues/{name}/deliveries/{id}/extend", tag = "deliveries",
    params(("name" = String, Path), ("id" = String, Path, description = DELIVERY_PARAM)),
    request_body = ExtendRequest, security(("bearer" = [])),
    responses((status = 200, body = ExtendResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn extend(
    State(state): AppStateRef,
    Path((name, key)): Path<(String, String)>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<ExtendResponse>> {
    auth::check(&state, &headers)?;
    let req: ExtendRequest = body(&raw)?;
    let duration = delay_of(req.duration_ms)?;
    let h = held(&state, &name, &key)?;
    // An acked or nacked delivery has no lease left to extend.
    let extended = !h.settled.initialized() && h.delivery.extend(duration).await?;
    Ok(Json(ExtendResponse {
        extended,
        deadline: h.delivery.deadline(),
    }))
}

/// A dead letter.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DeadLetterJson {
    id: String,
    #[serde(flatten)]
    payload: Payload,
    /// Deliveries it had.
    attempts: u32,
    /// When it was buried (Unix ms, server clock).
    died_at: i64,
    /// For a webhook message: its URL and the last attempt's status and error.
    webhook: Option<WebhookRecord>,
}

/// Dead letters, in no particular order.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DeadLetters {
    dead_letters: Vec<DeadLetterJson>,
}

#[utoipa::path(get, path = "/v1/queues/{name}/dead-letters", tag = "dead letters",
    params(("name" = String, Path), ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100")),
    responses((status = 200, body = DeadLetters), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn dead_letters(
    State(state): AppStateRef,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<DeadLetters>> {
    let mut limit = 100;
    for pair in query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=') {
            Some(("limit", v)) => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_DEAD_LIST).contains(n))
                    .ok_or_else(|| ApiError::invalid(format!("limit is 1 to {MAX_DEAD_LIST}")))?
            }
            _ => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {pair:?}"
                )))
            }
        }
    }
    let q = state.reliable_read(&name)?;
    let dead = q.dead_letters(limit).await?;
    let records: Vec<Option<String>> = if dead.is_empty() {
        Vec::new()
    } else {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(webhook::record_key(&name));
        for d in &dead {
            cmd.arg(&d.id);
        }
        state.client.query(&cmd).await?
    };
    let dead_letters = dead
        .into_iter()
        .enumerate()
        .map(|(i, d)| DeadLetterJson {
            payload: Payload::of(&d.payload),
            attempts: d.attempts,
            died_at: d.died_at,
            webhook: records
                .get(i)
                .cloned()
                .flatten()
                .and_then(|r| serde_json::from_str::<WebhookRecord>(&r).ok())
                .map(WebhookRecord::redacted),
            id: d.id,
        })
        .collect();
    Ok(Json(DeadLetters { dead_letters }))
}

/// Which dead letters to requeue: these ids, or all when absent.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequeueRequest {
    ids: Option<Vec<String>>,
}

/// How many dead letters were made ready again.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RequeueResponse {
    requeued: u64,
}

#[utoipa::path(post, path = "/v1/queues/{name}/dead-letters/requeue", tag = "dead letters",
    params(("name" = String, Path)), request_body = Option<RequeueRequest>, security(("bearer" = [])),
    responses((status = 200, body = RequeueResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn requeue_dead(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<RequeueResponse>> {
    auth::check(&state, &headers)?;
    let req: RequeueRequest = body(&raw)?;
    for id in req.ids.iter().flatten() {
        check_id(id)?;
    }
    let mut q = state.reliable(&name)?;
    let requeued = q.requeue_dead(req.ids.as_deref()).await?;
    q.succeeded();
    state.saw(true, &name);
    Ok(Json(RequeueResponse { requeued }))
}

/// How many dead letters were deleted.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct PurgeResponse {
    purged: u64,
}

#[utoipa::path(delete, path = "/v1/queues/{name}/dead-letters", tag = "dead letters",
    params(("name" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = PurgeResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn purge_dead(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<PurgeResponse>> {
    auth::check(&state, &headers)?;
    no_body(&raw)?;
    let mut q = state.reliable(&name)?;
    // The webhook records of the dead letters go with them.
    let ids: Vec<String> = q
        .dead_letters(100_000)
        .await?
        .into_iter()
        .map(|d| d.id)
        .collect();
    let purged = q.purge_dead().await?;
    q.succeeded();
    state.saw(true, &name);
    for chunk in ids.chunks(1000) {
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(webhook::record_key(&name)).arg(chunk);
        let _ = state.client.query::<i64>(&cmd).await;
    }
    Ok(Json(PurgeResponse { purged }))
}

/// The same as `DELETE /v1/queues/{name}/dead-letters`.
///
/// For clients that cannot send `DELETE`.
#[utoipa::path(post, path = "/v1/queues/{name}/dead-letters/purge", tag = "dead letters",
    params(("name" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = PurgeResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn purge_dead_post(
    state: AppStateRef,
    name: Path<String>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<PurgeResponse>> {
    purge_dead(state, name, headers, raw).await
}

// The first spelling of the dead letters' routes, `/dead`, answers as `/dead-letters`.

/// The same as `GET /v1/queues/{name}/dead-letters`.
#[utoipa::path(get, path = "/v1/queues/{name}/dead", tag = "dead letters",
    params(("name" = String, Path), ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100")),
    responses((status = 200, body = DeadLetters), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
#[deprecated = "/dead-letters"]
async fn dead_letters_short(
    state: AppStateRef,
    name: Path<String>,
    query: RawQuery,
) -> ApiResult<Json<DeadLetters>> {
    dead_letters(state, name, query).await
}

/// The same as `POST /v1/queues/{name}/dead-letters/requeue`.
#[utoipa::path(post, path = "/v1/queues/{name}/dead/requeue", tag = "dead letters",
    params(("name" = String, Path)), request_body = Option<RequeueRequest>, security(("bearer" = [])),
    responses((status = 200, body = RequeueResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
#[deprecated = "/dead-letters/requeue"]
async fn requeue_dead_short(
    state: AppStateRef,
    name: Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Json<RequeueResponse>> {
    requeue_dead(state, name, headers, raw).await
}

/// The same as `DELETE /v1/queues/{name}/dead-letters`.
#[utoipa::path(delete, path = "/v1/queues/{name}/dead", tag = "dead letters",
    params(("name" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = PurgeResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
#[deprecated = "/dead-letters"]
async fn purge_dead_short(
    state: AppStateRef,
    name: Path<String>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<PurgeResponse>> {
    purge_dead(state, name, headers, raw).await
}

/// The same as `POST /v1/queues/{name}/dead-letters/purge`.
#[utoipa::path(post, path = "/v1/queues/{name}/dead/purge", tag = "dead letters",
    params(("name" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = PurgeResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
#[deprecated = "/dead-letters/purge"]
async fn purge_dead_post_short(
    state: AppStateRef,
    name: Path<String>,
    headers: HeaderMap,
    raw: UnwantedBody,
) -> ApiResult<Json<PurgeResponse>> {
    purge_dead(state, name, headers, raw).await
}

// ---------------------------------------------------------------- delayed queue

/// A Redisson-compatible delayed queue.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DelayedInfo {
    name: String,
    counts: DelayedCounts,
    totals: Totals,
}

#[utoipa::path(get, path = "/v1/delayed/{name}", tag = "delayed queues",
    params(("name" = String, Path)),
    responses((status = 200, body = DelayedInfo), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn get_delayed(
    State(state): AppStateRef,
    Path(name): Path<String>,
) -> ApiResult<Json<DelayedInfo>> {
    let q = state.delayed_read(&name)?;
    let s = q.stats().await?;
    Ok(Json(DelayedInfo {
        counts: DelayedCounts {
            delayed: s.delayed,
            ready: s.ready,
            corrupt: s.corrupt,
        },
        totals: totals(delayq::metrics::QueueKind::Delayed, &name),
        name,
    }))
}

/// A value to offer to a delayed queue. Give `payload` or `payload_base64`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DelayedOfferRequest {
    /// As an offer's to a reliable queue: a string, or any other JSON value as its text.
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<RawValue>>,
    payload_base64: Option<String>,
    #[serde(default)]
    delay_ms: u64,
}

/// When the value is due.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DelayedOfferResponse {
    /// Unix ms, as the Redis server computed it.
    due_at: i64,
}

#[utoipa::path(post, path = "/v1/delayed/{name}/messages", tag = "delayed queues",
    params(("name" = String, Path)), request_body = DelayedOfferRequest, security(("bearer" = [])),
    responses((status = 201, body = DelayedOfferResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn delayed_offer(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<(StatusCode, Json<DelayedOfferResponse>)> {
    auth::check(&state, &headers)?;
    let req: DelayedOfferRequest = body(&raw)?;
    let payload = payload_of(req.payload, req.payload_base64)?;
    let delay = delay_of(req.delay_ms)?;
    let mut q = state.delayed(&name)?;
    let due_at = q.offer(payload, delay).await?;
    q.succeeded();
    state.saw(false, &name);
    Ok((StatusCode::CREATED, Json(DelayedOfferResponse { due_at })))
}

/// Take the oldest due value, waiting up to `wait_ms` (0 to 30000, default 0: poll).
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct TakeRequest {
    /// Wait up to this many ms for a value (0 to 30000, default 0: answer at once). Also
    /// accepted as `timeout_ms`.
    #[serde(alias = "timeout_ms")]
    #[schema(maximum = 30000)]
    wait_ms: Option<u64>,
}

/// The value taken, or `value: null` when none came in time.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct TakeResponse {
    value: Option<Payload>,
}

#[utoipa::path(post, path = "/v1/delayed/{name}/take", tag = "delayed queues",
    params(("name" = String, Path)), request_body = Option<TakeRequest>, security(("bearer" = [])),
    responses((status = 200, body = TakeResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn delayed_take(
    State(state): AppStateRef,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> ApiResult<Response> {
    auth::check(&state, &headers)?;
    let req: TakeRequest = body(&raw)?;
    let wait = req.wait_ms.unwrap_or(0);
    if wait > MAX_WAIT_MS {
        return Err(ApiError::invalid(format!("wait_ms is 0 to {MAX_WAIT_MS}")));
    }
    let mut q = state.delayed(&name)?;
    // Cancel-safe like receive: a take cut short by the service stopping gives back what
    // it was handed and answers `value: null`.
    let value = tokio::select! {
        biased;
        value = q.take(Some(Duration::from_millis(wait))) => value?,
        _ = state.stop.cancelled() => None,
    };
    q.succeeded();
    state.saw(false, &name);
    let answer = TakeResponse {
        value: value.as_deref().map(Payload::of),
    };
    let Some(value) = value else {
        return Ok(Json(answer).into_response());
    };
    // An answer that is never written puts the value back at the head of the queue.
    let q = q.handle();
    let give_back = move || {
        handover::spawn(async move {
            if let Err(e) = q.give_back(&value).await {
                tracing::error!(queue = ?q.name(), error = %Esc(&e), "could not give back a value whose answer was not sent");
            }
        })
    };
    Ok(HandOver::json(&answer, give_back))
}

// ---------------------------------------------------------------- the document

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The second names of request fields (serde's `alias`es above): `(schema, alias, field)`.
/// The document lists each as a property of its own, marked deprecated, so that a client
/// that validates against `additionalProperties: false` accepts them, as the server does.
/// (A test compares every request schema's properties with the names the server takes.)
const ALIASES: &[(&str, &str, &str)] = &[
    ("ReceiveRequest", "n", "max"),
    ("ReceiveRequest", "count", "max"),
    ("ReceiveRequest", "limit", "max"),
    ("ReceiveRequest", "max_messages", "max"),
    ("ReceiveRequest", "timeout_ms", "wait_ms"),
    ("TakeRequest", "timeout_ms", "wait_ms"),
    ("ExtendRequest", "ms", "duration_ms"),
    ("ExtendRequest", "visibility_timeout_ms", "duration_ms"),
    ("SettingsRequest", "visibility_ms", "visibility_timeout_ms"),
];

struct Aliases;

impl utoipa::Modify for Aliases {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{schema::Schema, Deprecated, RefOr};
        let components = openapi.components.get_or_insert_with(Default::default);
        for (schema, alias, field) in ALIASES {
            let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(*schema) else {
                panic!("no object schema {schema}");
            };
            let Some(RefOr::T(Schema::Object(property))) = object.properties.get(*field) else {
                panic!("no property {field} of {schema}");
            };
            let mut property = property.clone();
            property.description = Some(format!(
                "Another name for `{field}` (the same field: give one of them)."
            ));
            // A field needed under one of its names is not required under one of them.
            if let Some(at) = object.required.iter().position(|r| r == field) {
                object.required.remove(at);
                let own = object.properties.get_mut(*field);
                if let Some(RefOr::T(Schema::Object(own))) = own {
                    let d = own.description.get_or_insert_with(String::new);
                    d.push_str(" Required, under this name or another.");
                }
            }
            property.deprecated = Some(Deprecated::True);
            object
                .properties
                .insert((*alias).to_owned(), RefOr::T(Schema::Object(property)));
        }
    }
}

/// The errors the HTTP layer answers on any route of a kind, declared on each: 403
/// `host_not_allowed` on every route (a `Host` it does not serve: DNS rebinding,
/// `crate::host`), `read_only` and `cross_site` too on the mutating ones, which also read a
/// body (413); 500 `server` on those that reach Redis (that declare 503). A method a path
/// does not list is 405 and an unknown path 404, which belong to no operation: the
/// document's description says so.
struct LayerErrors;

impl utoipa::Modify for LayerErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        const HOST: &str = "`host_not_allowed`: the request's `Host` is not one this service \
            answers (on a loopback address: `localhost`, `127.x.x.x`, `[::1]` and \
            `DELAYQ_ALLOWED_HOSTS`; against DNS rebinding, see docs/serve.md)";
        let error = |description: String| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        };
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for op in operations.into_iter().flatten() {
                let mutating = op.security.is_some();
                let responses = &mut op.responses.responses;
                let forbidden = if mutating {
                    format!(
                        "`read_only`: no token is configured; `cross_site`: asked by a page \
                         of another site (its `Origin` is not this service's); {HOST}"
                    )
                } else {
                    HOST.to_owned()
                };
                responses.insert("403".to_owned(), error(forbidden));
                if mutating {
                    responses.insert(
                        "413".to_owned(),
                        error(format!(
                            "`invalid_argument`: the request body is over the limit of {MAX_BODY} bytes"
                        )),
                    );
                }
                if responses.contains_key("503") {
                    responses.insert(
                        "500".to_owned(),
                        error("`server`: an error Redis reported (`OOM`, `NOPERM`...)".into()),
                    );
                }
            }
        }
    }
}

/// The OpenAPI document of the service, served at `/openapi.json`.
#[derive(OpenApi)]
#[openapi(
    info(title = "delayq serve", description = "Delayed and reliable queues on Redis over HTTP (docs/serve.md). \
        Every error answer is an `ErrorBody`. Besides the responses each operation lists, a path \
        asked with a method it does not list answers 405 `method_not_allowed` (with `Allow`), and \
        a path not listed here 404 `not_found`."),
    paths(server_info, openapi, list_queues, get_queue, get_settings, put_settings, offer, cancel,
        reschedule, receive, ack, nack, extend, dead_letters, requeue_dead, purge_dead,
        purge_dead_post, dead_letters_short, requeue_dead_short, purge_dead_short,
        purge_dead_post_short, get_delayed, delayed_offer, delayed_take, crate::metrics::metrics,
        crate::dashboard::index),
    modifiers(&BearerAuth, &Aliases, &LayerErrors),
)]
pub struct ApiDoc;
