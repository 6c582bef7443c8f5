//! The MCP recording proxy behind `chainweaver record -- CMD ARGS...`.
//!
//! The proxy starts the MCP server `CMD` as a child and stands between it and the client on
//! stdio: the client's stdin goes to the child's stdin and the child's stdout to the client,
//! byte for byte; the child's stderr is the proxy's. Two relay threads ([`mod@relay`]) forward
//! each chunk as soon as it is read and only then offer a copy, through a bounded channel, to
//! one observer thread, which cuts the copies into lines ([`framing`]), pairs `tools/call`
//! requests with their answers ([`session`]) and stores each call as a step through the
//! recorder ([`sink`]), redacted as every recorded step is. The relay never waits for the
//! observer or the store: when they fall behind, or the store cannot be written, traffic still
//! flows and what was not recorded is counted in the [`RecordReport`].
//!
//! The proxy exits when the child does, with its exit code (a child killed by signal `n` gives
//! `128 + n`), and leaves no child behind: when the client closes stdin, the child's stdin is
//! closed and the child is given [`RecordOptions::shutdown_grace`] to exit, then SIGTERM, then,
//! after the same grace, SIGKILL; a SIGTERM, SIGINT or SIGHUP sent to the proxy is passed on to
//! the child, with SIGKILL after the grace. A proxy killed outright (SIGKILL) cannot act, but
//! it held the only writing end of the child's stdin, so the child sees its input end, which an
//! MCP server takes as the end of the session.

pub mod framing;
pub mod relay;
pub mod session;
pub mod sink;

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chainweaver_recorder::capture::RecorderConfig;
use chainweaver_recorder::model::mcp;
use chrono::Utc;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;

use crate::error::{Error, Result};
use framing::LineFramer;
use relay::{PumpEnd, TapLoss, Tapped, pump};
use session::{Direction, Observer, TraceBy};
use sink::{Sink, SinkConfig, SinkReport};

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The server's command and its arguments.
    pub command: Vec<OsString>,
    /// The store the calls are recorded into.
    pub store: PathBuf,
    /// How calls are grouped into traces.
    pub trace_by: TraceBy,
    /// How long the child may take to exit after its stdin closes, or after a signal, before
    /// the next, harder one.
    pub shutdown_grace: Duration,
    /// Copies of relayed chunks waiting for the observer; beyond this they are dropped.
    pub tap_capacity: usize,
    /// The longest message parsed; longer ones are relayed but not recorded.
    pub max_message_bytes: usize,
    /// The longest wait at exit for the store to confirm the last steps.
    pub flush_timeout: Duration,
    /// The recorder's batching and redaction.
    pub recorder: RecorderConfig,
}

impl RecordOptions {
    /// Defaults for running `command`, recording into `store`.
    pub fn new(command: Vec<OsString>, store: PathBuf) -> Self {
        Self {
            command,
            store,
            trace_by: TraceBy::Session,
            shutdown_grace: Duration::from_secs(5),
            tap_capacity: 4096,
            max_message_bytes: 256 * 1024 * 1024,
            flush_timeout: Duration::from_secs(2),
            recorder: RecorderConfig {
                // Each step is committed within a few milliseconds, so a crash of the proxy
                // loses at most the last moments.
                max_batch_delay: Duration::from_millis(10),
                channel_capacity: 1024,
                source: mcp::SOURCE.to_owned(),
                ..RecorderConfig::default()
            },
        }
    }
}

/// What a proxy run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecordReport {
    /// The exit code the proxy exits with: the child's, or `128 + n` for signal `n`.
    pub exit_code: u8,
    /// The signal that ended the child, if one did.
    pub child_signal: Option<i32>,
    /// What ended the run: `client closed stdin`, `server exited`, `signal SIGTERM`, ...
    pub ended_by: String,
    /// JSON-RPC messages seen (batch elements counted one by one).
    pub messages: u64,
    /// `tools/call` requests that ended (answered, failed, cancelled or never answered).
    pub tool_calls: u64,
    /// Traces started.
    pub traces: u64,
    /// Steps the store confirmed written.
    pub steps_stored: u64,
    /// Calls that were not stored.
    pub steps_lost: u64,
    /// Relayed bytes the observer never saw (it fell behind); calls in them are not recorded.
    pub unobserved_bytes: u64,
    /// Lines that are not JSON-RPC messages (relayed all the same).
    pub malformed_lines: u64,
    /// Messages too large to record, or cut by unobserved bytes (relayed all the same).
    pub skipped_messages: u64,
    /// Why calls were not stored, if some were not.
    pub store_error: Option<String>,
    /// The recorder had not finished storing when the proxy had to exit (the store is slow or
    /// locked): the counts above are then unknown, and calls of this run may not be stored.
    pub recorder_unfinished: bool,
}

impl RecordReport {
    /// Whether anything that should have been recorded was not.
    pub fn lost_anything(&self) -> bool {
        self.steps_lost > 0
            || self.unobserved_bytes > 0
            || self.skipped_messages > 0
            || self.recorder_unfinished
    }
}

/// Events the control loop waits for.
#[derive(Debug)]
enum Event {
    /// The client-to-server relay ended.
    ToServer(PumpEnd),
    /// The server-to-client relay ended.
    ToClient(PumpEnd),
    /// The proxy received this signal.
    Signal(Signal),
}

/// Where the shutdown stands.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Relaying.
    Running,
    /// Waiting for the child to exit on its own until the deadline, then `next`.
    Waiting { until: Instant, next: Signal },
}

/// Run the proxy until the child exits (see the module docs). `on_signal` is where the
/// signals are awaited; it is given a sender and runs on its own thread.
pub fn record(
    options: RecordOptions,
    on_signal: impl FnOnce(Sender<Signal>) + Send + 'static,
) -> Result<RecordReport> {
    let (program, args) = options
        .command
        .split_first()
        .ok_or_else(|| Error::ProxySpawn {
            command: String::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "no server command given"),
        })?;
    let command_line = options
        .command
        .iter()
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| Error::ProxySpawn {
            command: command_line.clone(),
            source,
        })?;
    let outcome = relay(&mut child, &options, command_line, on_signal);
    if outcome.is_err() {
        // The relay could not be set up: the child must not outlive the proxy.
        let _ = child.kill();
        let _ = child.wait();
    }
    outcome
}

/// Relay between the proxy's stdio and the child's until the child exits, then report.
fn relay(
    child: &mut Child,
    options: &RecordOptions,
    command_line: String,
    on_signal: impl FnOnce(Sender<Signal>) + Send + 'static,
) -> Result<RecordReport> {
    let origin = (Instant::now(), Utc::now());
    let (Some(child_stdin), Some(child_stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::ProxySpawn {
            command: command_line,
            source: io::Error::other("the child's pipes were not set up"),
        });
    };
    let (client_in, client_out) = own_stdio().map_err(|source| Error::Io {
        path: PathBuf::from("<stdio>"),
        source,
    })?;

    let (tap, copies) = crossbeam_channel::bounded(options.tap_capacity.max(1));
    let loss = Arc::new(TapLoss::default());
    let observer = spawn_observer(options, command_line, copies, origin)?;
    let (events, incoming) = crossbeam_channel::unbounded();
    spawn_pumps(
        (client_in, child_stdin),
        (child_stdout, client_out),
        &tap,
        &loss,
        &events,
    )?;
    let (signals, signalled) = crossbeam_channel::unbounded();
    spawn_signal_forwarder(on_signal, signals, signalled, events)?;

    let ended = supervise(child, &incoming, options.shutdown_grace);
    if !ended.output_done {
        // Let the server-to-client relay pass on what the child wrote last.
        drain_output(&incoming, options.shutdown_grace);
    }
    // The observer gets the flush timeout to take in what is queued and store it; a store that
    // is stuck does not hold the exit longer than that, nor past a signal (an MCP client that
    // closed stdin kills a server that does not exit within a few seconds).
    let deadline = Instant::now() + options.flush_timeout;
    let _ = tap.send_deadline(Tapped::End { at: Instant::now() }, deadline);
    drop(tap);
    let observed = await_observer(&observer, &incoming, deadline + Duration::from_millis(500));
    Ok(report(ended.status, ended.ended_by, observed, &loss))
}

/// The observer's result, unless the deadline passes or a signal comes first.
fn await_observer(
    observer: &Receiver<Observed>,
    events: &Receiver<Event>,
    deadline: Instant,
) -> Option<Observed> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        crossbeam_channel::select! {
            recv(observer) -> observed => return observed.ok(),
            recv(events) -> event => match event {
                Ok(Event::Signal(_)) => return None,
                Ok(_) => {}
                // No event source is left; only the observer can still answer.
                Err(_) => return observer.recv_deadline(deadline).ok(),
            },
            default(left) => return None,
        }
    }
}

/// What the observer thread hands back.
struct Observed {
    sink: SinkReport,
    messages: u64,
    malformed_lines: u64,
    skipped_messages: u64,
}

fn report(
    status: ExitStatus,
    ended_by: String,
    observed: Option<Observed>,
    loss: &TapLoss,
) -> RecordReport {
    let (exit_code, child_signal) = exit_code(status);
    let mut report = RecordReport {
        exit_code,
        child_signal,
        ended_by,
        unobserved_bytes: loss.bytes.load(Ordering::Relaxed),
        ..RecordReport::default()
    };
    match observed {
        Some(observed) => {
            report.messages = observed.messages;
            report.tool_calls = observed.sink.calls;
            report.traces = observed.sink.traces;
            report.steps_stored = observed.sink.steps_stored;
            report.steps_lost = observed.sink.steps_lost;
            report.store_error = observed.sink.store_error;
            report.malformed_lines = observed.malformed_lines;
            report.skipped_messages = observed.skipped_messages;
        }
        None => report.recorder_unfinished = true,
    }
    report
}

/// The exit code for the child's status, and the signal that ended it.
fn exit_code(status: ExitStatus) -> (u8, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (u8::try_from(code & 0xff).unwrap_or(1), None),
        (None, Some(signal)) => (
            u8::try_from((128 + signal) & 0xff).unwrap_or(1),
            Some(signal),
        ),
        (None, None) => (1, None),
    }
}

/// The proxy's own stdin and stdout as unbuffered files (the standard handles buffer lines).
fn own_stdio() -> io::Result<(std::fs::File, std::fs::File)> {
    let stdin = io::stdin().as_fd().try_clone_to_owned()?;
    let stdout = io::stdout().as_fd().try_clone_to_owned()?;
    Ok((std::fs::File::from(stdin), std::fs::File::from(stdout)))
}

fn spawn_named<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(work)
        .map_err(|e| Error::Runtime(format!("could not start the {name} thread: {e}")))
}

fn spawn_pumps(
    to_server: (std::fs::File, ChildStdin),
    to_client: (std::process::ChildStdout, std::fs::File),
    tap: &Sender<Tapped>,
    loss: &Arc<TapLoss>,
    events: &Sender<Event>,
) -> Result<()> {
    let (client_in, child_stdin) = to_server;
    let (tap_in, loss_in, events_in) = (tap.clone(), Arc::clone(loss), events.clone());
    spawn_named("chainweaver-record-in", move || {
        let end = pump(
            Direction::ToServer,
            client_in,
            child_stdin,
            &tap_in,
            &loss_in,
        );
        // The child's stdin closed here (dropped with the pump's arguments).
        let _ = events_in.send(Event::ToServer(end));
    })?;
    let (child_stdout, client_out) = to_client;
    let (tap_out, loss_out, events_out) = (tap.clone(), Arc::clone(loss), events.clone());
    spawn_named("chainweaver-record-out", move || {
        let end = pump(
            Direction::ToClient,
            child_stdout,
            client_out,
            &tap_out,
            &loss_out,
        );
        let _ = events_out.send(Event::ToClient(end));
    })?;
    Ok(())
}

fn spawn_signal_forwarder(
    on_signal: impl FnOnce(Sender<Signal>) + Send + 'static,
    signals: Sender<Signal>,
    signalled: Receiver<Signal>,
    events: Sender<Event>,
) -> Result<()> {
    spawn_named("chainweaver-record-signals", move || on_signal(signals))?;
    spawn_named("chainweaver-record-signal-events", move || {
        for signal in signalled {
            if events.send(Event::Signal(signal)).is_err() {
                return;
            }
        }
    })?;
    Ok(())
}

fn spawn_observer(
    options: &RecordOptions,
    server_command: String,
    copies: Receiver<Tapped>,
    origin: (Instant, chrono::DateTime<Utc>),
) -> Result<Receiver<Observed>> {
    let config = SinkConfig {
        store: options.store.clone(),
        server_command,
        recorder: options.recorder.clone(),
        flush_timeout: options.flush_timeout,
    };
    let trace_by = options.trace_by.clone();
    let max_message = options.max_message_bytes;
    let (done, result) = crossbeam_channel::bounded(1);
    spawn_named("chainweaver-record-observer", move || {
        let observed = observe(copies, Sink::open(config, origin), trace_by, max_message);
        let _ = done.send(observed);
    })?;
    Ok(result)
}

/// The observer thread: frame, pair, store, until the end mark (or every relay is gone).
fn observe(
    copies: Receiver<Tapped>,
    mut sink: Sink,
    trace_by: TraceBy,
    max_message: usize,
) -> Observed {
    let mut observer = Observer::new(trace_by);
    let mut to_server = LineFramer::new(max_message);
    let mut to_client = LineFramer::new(max_message);
    let mut calls = Vec::new();
    let mut end = None;
    for tapped in &copies {
        match tapped {
            Tapped::Bytes {
                direction,
                bytes,
                at,
                gap,
            } => {
                let framer = match direction {
                    Direction::ToServer => &mut to_server,
                    Direction::ToClient => &mut to_client,
                };
                framer.push(&bytes, gap, |line| {
                    observer.line(direction, line, at, &mut calls)
                });
                for call in calls.drain(..) {
                    sink.record(call, observer.info());
                }
                for (session, info) in observer.take_ended() {
                    sink.end_session(session, &info);
                }
            }
            Tapped::End { at } => {
                end = Some(at);
                break;
            }
        }
    }
    let at = end.unwrap_or_else(Instant::now);
    for (direction, framer) in [
        (Direction::ToServer, &mut to_server),
        (Direction::ToClient, &mut to_client),
    ] {
        framer.finish(|line| observer.line(direction, line, at, &mut calls));
    }
    observer.finish(at, &mut calls);
    for call in calls.drain(..) {
        sink.record(call, observer.info());
    }
    let counts = observer.counts();
    Observed {
        sink: sink.close(observer.info()),
        messages: counts.messages,
        malformed_lines: counts.malformed_lines,
        skipped_messages: to_server.oversized
            + to_server.incomplete
            + to_client.oversized
            + to_client.incomplete,
    }
}

/// How the child ended.
struct Supervised {
    status: ExitStatus,
    /// What ended the run.
    ended_by: String,
    /// Whether the server-to-client relay has ended.
    output_done: bool,
}

/// Wait for the child to exit, driving the shutdown.
fn supervise(child: &mut Child, events: &Receiver<Event>, grace: Duration) -> Supervised {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let mut stage = Stage::Running;
    let mut ended_by: Option<String> = None;
    let mut output_done = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Supervised {
                    status,
                    ended_by: ended_by.unwrap_or_else(|| "the server exited".into()),
                    output_done,
                };
            }
            Ok(None) => {}
            Err(_) => {
                // Not ours to wait for any more; make sure it is gone.
                let _ = child.kill();
                let status = child
                    .wait()
                    .unwrap_or_else(|_| ExitStatus::from_raw(1 << 8));
                return Supervised {
                    status,
                    ended_by: ended_by.unwrap_or_else(|| "the server exited".into()),
                    output_done,
                };
            }
        }
        let now = Instant::now();
        if let Stage::Waiting { until, next } = stage
            && now >= until
        {
            let _ = kill(pid, next);
            // After SIGKILL nothing harder exists: keep waiting for the kernel to end it.
            stage = Stage::Waiting {
                until: now + grace,
                next: Signal::SIGKILL,
            };
        }
        match events.recv_timeout(Duration::from_millis(5)) {
            Ok(Event::ToServer(end)) => {
                if matches!(stage, Stage::Running) {
                    ended_by.get_or_insert_with(|| match end {
                        PumpEnd::DestinationClosed => "the server closed its stdin".into(),
                        _ => "the client closed stdin".into(),
                    });
                    // The child's stdin is closed: give it the grace to exit, then SIGTERM.
                    stage = Stage::Waiting {
                        until: Instant::now() + grace,
                        next: Signal::SIGTERM,
                    };
                }
            }
            Ok(Event::ToClient(end)) => {
                output_done = true;
                if end == PumpEnd::DestinationClosed && matches!(stage, Stage::Running) {
                    // The client stopped reading: the session is over.
                    ended_by.get_or_insert_with(|| "the client closed stdout".into());
                    let _ = kill(pid, Signal::SIGTERM);
                    stage = Stage::Waiting {
                        until: Instant::now() + grace,
                        next: Signal::SIGKILL,
                    };
                } else if matches!(stage, Stage::Running) {
                    // The server closed its stdout: it is exiting, or should be.
                    stage = Stage::Waiting {
                        until: Instant::now() + grace,
                        next: Signal::SIGTERM,
                    };
                }
            }
            Ok(Event::Signal(signal)) => {
                ended_by.get_or_insert_with(|| format!("signal {}", signal.as_str()));
                let _ = kill(pid, signal);
                stage = Stage::Waiting {
                    until: Instant::now() + grace,
                    next: Signal::SIGKILL,
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
            // Every event source is gone; keep polling the child.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// After the child exited, wait (at most `grace`) for the server-to-client relay to end.
fn drain_output(events: &Receiver<Event>, grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        match events.recv_deadline(deadline) {
            Ok(Event::ToClient(_)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Await SIGTERM, SIGINT and SIGHUP and send each to `signals` (until it is closed). The
/// signals are caught only while this runs, so call it once, on its own thread, as
/// [`record`]'s `on_signal`.
pub fn os_signals(signals: Sender<Signal>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return;
    };
    runtime.block_on(async move {
        let (Ok(mut terminate), Ok(mut interrupt), Ok(mut hangup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        loop {
            let caught = tokio::select! {
                _ = terminate.recv() => Signal::SIGTERM,
                _ = interrupt.recv() => Signal::SIGINT,
                _ = hangup.recv() => Signal::SIGHUP,
            };
            if signals.send(caught).is_err() {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), (3, None));
        assert_eq!(exit_code(ExitStatus::from_raw(0)), (0, None));
        // Killed by SIGTERM (15).
        assert_eq!(exit_code(ExitStatus::from_raw(15)), (143, Some(15)));
        assert_eq!(exit_code(ExitStatus::from_raw(9)), (137, Some(9)));
    }
}
