//! Benchmark of the browser over a large SQLite store (see docs/benchmarks-tui.md).
//!
//! ```text
//! cargo run --release -p chainweaver-tui --example bench_tui -- [STORE] [--steps N]
//! ```
//!
//! Builds the store when it does not exist (N steps, default 1,000,000, ten a trace), then
//! measures: the first frame with data (open + first page + draw), filters from the filter line
//! to the frame that shows their answer, the last page, and how long key presses take to be
//! handled and drawn while a heavy query (per-tool statistics over every step) runs.

#![allow(clippy::print_stdout, clippy::print_stderr)] // an example binary reports on the console

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
use chainweaver_recorder::store::{SqliteStore, TraceStore, open_store};
use chainweaver_tui::Browser;
use chainweaver_tui::keymap::Key;
use chainweaver_tui::ui::{Theme, render};
use chrono::{TimeZone, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

const TOOLS: [&str; 20] = [
    "get_user_details",
    "get_order_details",
    "list_user_orders",
    "cancel_pending_order",
    "modify_pending_order_items",
    "modify_pending_order_address",
    "return_delivered_order_items",
    "exchange_delivered_order_items",
    "get_product_details",
    "list_all_product_types",
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "calculate",
    "transfer_to_human_agents",
    "search_direct_flight",
    "search_onestop_flight",
    "book_reservation",
    "cancel_reservation",
    "update_reservation_baggages",
    "think",
];

fn build(path: &std::path::Path, total_steps: u64) -> Result<(), Error> {
    let mut store = SqliteStore::open(path)?;
    let t0 = Utc
        .with_ymd_and_hms(2026, 11, 1, 0, 0, 0)
        .single()
        .ok_or("date")?;
    let per_trace = 10u64;
    let traces_total = total_steps / per_trace;
    let batch = 5_000u64;
    let started = Instant::now();
    let mut t = 0u64;
    while t < traces_total {
        let mut traces = Vec::new();
        let mut steps = Vec::new();
        for id_n in t..(t + batch).min(traces_total) {
            let id = format!("bench-{id_n:07}");
            let mut trace = ObservedTrace::new(
                &id,
                if id_n % 4 == 0 {
                    "recorder"
                } else {
                    "tau-bench/retail"
                },
            );
            let start = t0 + chrono::Duration::seconds(id_n as i64 * 13);
            trace.started_at = Some(start);
            let mut clock = 0i64;
            for i in 0..per_trace {
                let x = id_n.wrapping_mul(2_654_435_761).wrapping_add(i * 40_503);
                let tool = TOOLS[(x % TOOLS.len() as u64) as usize];
                let ms = 20 + (x >> 8) % 700 + if x % 97 == 0 { 3_000 } else { 0 };
                let mut step = ObservedStep::new(
                    &id,
                    i as u32,
                    tool,
                    json!({"user_id": format!("user_{}", id_n % 5_000), "order_id": format!("#W{x:07}")}),
                );
                step.started_at = Some(start + chrono::Duration::milliseconds(clock));
                step.ended_at = Some(start + chrono::Duration::milliseconds(clock + ms as i64));
                step.duration_ms = Some(ms as f64);
                if x % 53 == 0 {
                    step.error_type = Some("ToolError".into());
                    step.error_message = Some("not found".into());
                } else {
                    step.outputs = Some(json!({"status": "ok", "total": 10.5}));
                }
                clock += ms as i64 + 15;
                steps.push(step);
            }
            trace.ended_at = Some(start + chrono::Duration::milliseconds(clock));
            traces.push(trace);
        }
        store.append(&traces, &steps)?;
        t += batch;
    }
    println!(
        "built {} ({} traces, {} steps) in {:.1}s",
        path.display(),
        traces_total,
        traces_total * per_trace,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn draw(browser: &Browser, terminal: &mut Terminal<TestBackend>) -> Result<(), Error> {
    terminal.draw(|f| render(f, &browser.state, &Theme::default()))?;
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1_000.0)
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let mut path = std::env::temp_dir().join("chainweaver-bench-1m.db");
    let mut steps = 1_000_000u64;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--steps" => steps = args.next().ok_or("--steps needs N")?.parse()?,
            other => path = PathBuf::from(other),
        }
    }
    if !path.exists() {
        build(&path, steps)?;
    }
    let wait = Duration::from_secs(120);
    let mut terminal = Terminal::new(TestBackend::new(120, 40))?;

    // First frame with data: open the store, ask for the first page, draw it.
    let counts = {
        let store = open_store(&path)?;
        let t = Instant::now();
        let counts = store.counts()?;
        println!("counts: {}", ms(t.elapsed()));
        counts
    };
    let started = Instant::now();
    let store = open_store(&path)?;
    let mut browser = Browser::new(store, path.display().to_string(), (120, 40))?;
    draw(&browser, &mut terminal)?;
    let first_draw = started.elapsed();
    if !browser.settle(wait) {
        return Err("the first page never came".into());
    }
    draw(&browser, &mut terminal)?;
    let first_frame = started.elapsed();
    println!(
        "store: {} traces, {} steps ({} failed)",
        counts.traces, counts.steps, counts.failed_steps
    );
    println!("first frame (loading): {}", ms(first_draw));
    println!("first frame with data: {}", ms(first_frame));

    for query in [
        "tool=get_order_details",
        "tool=get_order_details error",
        "error dur>2s",
        "source=recorder",
        "since=2026-11-10 until=2026-11-11",
        "cancel",
        "tool=think !error dur>3s source=recorder",
    ] {
        browser.key(Key::Char('/'));
        browser.key(Key::Ctrl('u'));
        for c in query.chars() {
            browser.key(Key::Char(c));
        }
        let t = Instant::now();
        browser.key(Key::Enter);
        if !browser.settle(wait) {
            return Err(format!("filter {query} never answered").into());
        }
        draw(&browser, &mut terminal)?;
        let total = browser.state.traces.total().unwrap_or(0);
        println!("filter `{query}`: {} ({total} traces)", ms(t.elapsed()));
    }
    browser.key(Key::Char('x'));
    browser.settle(wait);

    for _ in 0..5 {
        let t = Instant::now();
        browser.key(Key::Char('s'));
        if !browser.settle(wait) {
            return Err("a sorted page never came".into());
        }
        draw(&browser, &mut terminal)?;
        println!(
            "sort by {:?} (descending {}): {}",
            browser.state.traces.sort,
            browser.state.traces.descending,
            ms(t.elapsed())
        );
    }
    let t = Instant::now();
    browser.key(Key::Enter);
    browser.settle(wait);
    draw(&browser, &mut terminal)?;
    println!("open the selected trace: {}", ms(t.elapsed()));
    browser.key(Key::Esc);
    browser.key(Key::Char('s'));
    browser.settle(wait);

    let t = Instant::now();
    browser.key(Key::Char('G'));
    browser.settle(wait);
    draw(&browser, &mut terminal)?;
    println!("last page (G): {}", ms(t.elapsed()));
    browser.key(Key::Char('g'));
    browser.settle(wait);

    // Keys while a heavy query runs: per-tool statistics over every step.
    let t = Instant::now();
    browser.key(Key::Tab);
    let mut worst = Duration::ZERO;
    let mut handled = 0;
    let script = [
        Key::Tab,
        Key::Char('j'),
        Key::Char('j'),
        Key::Char('?'),
        Key::Esc,
        Key::BackTab,
        Key::Char('j'),
        Key::Char('k'),
        Key::BackTab,
    ];
    while browser
        .state
        .is_loading(chainweaver_tui::worker::Slot::Tools)
    {
        for key in script {
            let k = Instant::now();
            browser.key(key);
            draw(&browser, &mut terminal)?;
            worst = worst.max(k.elapsed());
            handled += 1;
        }
        // Stay on the Tools tab between rounds; the answer is applied when it comes.
        let _ = browser.pump(Duration::from_millis(20));
    }
    println!(
        "tool statistics over every step: {}; meanwhile {handled} key presses handled and drawn, slowest {}",
        ms(t.elapsed()),
        ms(worst)
    );
    Ok(())
}
