//! A synthetic agent-traffic generator with planted flows and a ground-truth file.
//!
//! Realistic enough to exercise every part of ChainWeaver: traces mix known tool sequences whose
//! arguments flow from earlier outputs (the *planted flows*), noise calls (`think`,
//! `list_files`, ...), decoys (the same tools in the same order with unrelated arguments),
//! failures, varied payload sizes and timestamps spread over several days. The same seed always
//! gives the same traffic, byte for byte.
//!
//! ```
//! use chainweaver_recorder::synth::{Generator, GeneratorConfig};
//!
//! let config = GeneratorConfig { traces: 20, seed: 7, ..GeneratorConfig::default() };
//! let mut generator = Generator::new(config);
//! let first = generator.next_trace().unwrap();
//! assert!(!first.steps.is_empty());
//! assert_eq!(generator.ground_truth().flows.len(), 6);
//! ```

use chrono::{Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::model::{ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};

mod behaviours;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorConfig {
    /// Number of traces.
    pub traces: u64,
    /// Seed: the same seed gives the same traffic.
    pub seed: u64,
    /// Share of traces that contain at least one planted flow.
    pub flow_rate: f64,
    /// Expected noise calls between two flow instances.
    pub noise_per_gap: f64,
    /// Probability that any single call fails.
    pub failure_rate: f64,
    /// Share of flow instances replaced by a decoy (same tools, unrelated arguments).
    pub decoy_rate: f64,
    /// Days the traffic is spread over, starting 2026-11-01.
    pub days: u32,
    /// Also plant the behaviour flows (`synth::behaviours`): loops over a whole list and over
    /// the elements the agent picks, interchangeable first steps, an echoing step; and let a
    /// failed call cut its flow instance short, as agents give up on a failure.
    #[serde(default, skip_serializing_if = "is_false")]
    pub behaviours: bool,
    /// Probability of an unrelated call between two calls of a flow instance (what
    /// `--max-gap` mining is for).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interleave: f64,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            traces: 1000,
            seed: 42,
            flow_rate: 0.9,
            noise_per_gap: 1.5,
            failure_rate: 0.02,
            decoy_rate: 0.1,
            days: 14,
            behaviours: false,
            interleave: 0.0,
        }
    }
}

/// Where a planted argument comes from, as the ground truth states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlantedSource {
    /// A value the caller supplies: a flow input.
    FlowInput { name: String },
    /// An earlier step's output at a JSON pointer.
    StepOutput { step: usize, pointer: String },
    /// An earlier step's input at a JSON pointer.
    StepInput { step: usize, pointer: String },
    /// The same value every time.
    Constant { value: Value },
    /// A string embedding earlier values: `{{step.pointer}}` placeholders.
    Template { template: String },
    /// One element of a list in an earlier step's output.
    ListElement { step: usize, pointer: String },
    /// A loop step's argument: each call takes one element of a list in an earlier step's
    /// output (`item_pointer` inside it), all of them in order or, `selected`, those the agent
    /// picked.
    Each {
        step: usize,
        list_pointer: String,
        item_pointer: String,
        selected: bool,
    },
}

/// One argument of one step of a planted flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlantedBinding {
    pub step: usize,
    /// JSON pointer of the argument inside the step's inputs.
    pub field: String,
    pub source: PlantedSource,
}

/// A planted flow: a tool sequence and where each argument comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlantedFlow {
    pub name: String,
    pub tools: Vec<String>,
    pub bindings: Vec<PlantedBinding>,
    /// Complete instances generated (no failed step).
    pub instances: u64,
    /// Distinct traces holding at least one complete instance.
    pub traces: u64,
    /// Interchangeable first steps (the first tool is one of them), when there are several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_steps: Vec<String>,
    /// The step the agent calls once per list element (one or more calls back to back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_step: Option<usize>,
}

/// The generator's account of what it planted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    pub config: GeneratorConfig,
    pub flows: Vec<PlantedFlow>,
    /// Tool sequences generated as decoys: same tools as a flow, unrelated arguments.
    pub decoys: Vec<Vec<String>>,
    pub traces: u64,
    pub steps: u64,
    pub failed_steps: u64,
}

/// splitmix64: small, fast, and fully determined by the seed.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn id(&mut self, prefix: &str) -> String {
        format!("{prefix}_{:010x}", self.next_u64() & 0xFF_FFFF_FFFF)
    }
    /// A geometric-ish count with the given mean.
    fn count(&mut self, mean: f64) -> u64 {
        let mut n = 0;
        while self.unit() < mean / (mean + 1.0) && n < 50 {
            n += 1;
        }
        n
    }
}

const FIRST_NAMES: &[&str] = &[
    "ada", "linus", "grace", "alan", "edsger", "barbara", "ken", "margaret",
];
const LAST_NAMES: &[&str] = &[
    "lovelace", "torvalds", "hopper", "turing", "dijkstra", "liskov", "thompson", "hamilton",
];
const CITIES: &[&str] = &[
    "Lisbon", "Oslo", "Kyoto", "Lima", "Accra", "Perth", "Quebec", "Tartu",
];
const ENVS: &[&str] = &["staging", "production", "canary", "dev"];
const WORDS: &[&str] = &[
    "alpha", "bravo", "delta", "gamma", "kilo", "lima", "sierra", "tango", "zulu", "echo",
];
const NOISE_TOOLS: &[&str] = &[
    "think",
    "list_files",
    "get_time",
    "search_web",
    "read_file",
    "calculator",
];

/// A call about to be emitted: tool, inputs, outputs.
struct Call {
    tool: &'static str,
    inputs: Value,
    outputs: Value,
}

/// Streams synthetic traces one at a time; [`Generator::ground_truth`] says what was planted so far.
#[derive(Debug)]
pub struct Generator {
    config: GeneratorConfig,
    rng: Rng,
    next_trace: u64,
    truth: GroundTruth,
    base: Timestamp,
}

impl Generator {
    pub fn new(config: GeneratorConfig) -> Self {
        let mut flows = planted_flows();
        if config.behaviours {
            flows.extend(behaviours::planted());
        }
        let truth = GroundTruth {
            config: config.clone(),
            flows,
            decoys: vec![vec![
                "list_files".into(),
                "read_file".into(),
                "summarize".into(),
            ]],
            traces: 0,
            steps: 0,
            failed_steps: 0,
        };
        let base = Utc
            .with_ymd_and_hms(2026, 11, 1, 0, 0, 0)
            .single()
            .unwrap_or_default();
        Self {
            rng: Rng(config.seed ^ 0x5EED_C4A1_17EA_7E25),
            config,
            next_trace: 0,
            truth,
            base,
        }
    }

    /// What has been planted in the traces generated so far.
    pub fn ground_truth(&self) -> &GroundTruth {
        &self.truth
    }

    /// The next trace, or `None` after `config.traces` of them.
    pub fn next_trace(&mut self) -> Option<TraceWithSteps> {
        if self.next_trace >= self.config.traces {
            return None;
        }
        let index = self.next_trace;
        self.next_trace += 1;
        let trace_id = format!("syn-{:08}", index);
        let day = self.rng.below(u64::from(self.config.days.max(1)));
        let second = self.rng.below(86_000);
        let start = self.base + Duration::days(day as i64) + Duration::seconds(second as i64);

        // Each call, with the planted flow and instance it belongs to.
        let mut calls: Vec<(Call, Option<(usize, usize)>)> = Vec::new();
        let flows_here = if self.rng.chance(self.config.flow_rate) {
            1 + self.rng.below(2)
        } else {
            0
        };
        let mut gap = self.rng.count(self.config.noise_per_gap);
        for _ in 0..gap {
            calls.push((self.noise_call(), None));
        }
        for instance in 0..flows_here as usize {
            let which = self.rng.below(self.truth.flows.len() as u64) as usize;
            if self.rng.chance(self.config.decoy_rate) {
                for call in self.decoy_calls() {
                    calls.push((call, None));
                }
            } else {
                let flow_calls = self.flow_calls(which);
                let last = flow_calls.len().saturating_sub(1);
                for (position, call) in flow_calls.into_iter().enumerate() {
                    calls.push((call, Some((which, instance))));
                    if position < last
                        && self.config.interleave > 0.0
                        && self.rng.chance(self.config.interleave)
                    {
                        calls.push((self.noise_call(), None));
                    }
                }
            }
            gap = self.rng.count(self.config.noise_per_gap);
            for _ in 0..gap {
                calls.push((self.noise_call(), None));
            }
        }

        let trace = {
            let mut trace = ObservedTrace::new(trace_id.clone(), "synthetic");
            trace.agent =
                Some((*self.rng.pick(&["planner-v1", "planner-v2", "support-bot"])).to_string());
            trace.session_id = Some(format!("session-{}", index / 3));
            trace.started_at = Some(start);
            trace
                .metadata
                .insert("seed".into(), json!(self.config.seed));
            trace
        };
        let mut steps = Vec::with_capacity(calls.len());
        let mut clock = start;
        // A flow instance counts for the ground truth only when none of its steps failed.
        // (flow, instance, complete so far), in order of first call.
        let mut instance_ok: Vec<(usize, usize, bool)> = Vec::new();
        // With behaviours, a failed call ends its instance: the agent gives up on the rest.
        let mut cut: Option<usize> = None;
        for (call, flow) in calls {
            if let Some((_, instance)) = flow
                && cut == Some(instance)
            {
                continue;
            }
            let index = steps.len();
            let failed = self.rng.chance(self.config.failure_rate);
            let duration_ms = 5 + self.rng.below(400) + if failed { 1000 } else { 0 };
            let mut step = ObservedStep::new(&trace_id, index as u32, call.tool, call.inputs);
            step.call_id = Some(format!("call_{index}"));
            step.started_at = Some(clock);
            let ended = clock + Duration::milliseconds(duration_ms as i64);
            step.ended_at = Some(ended);
            step.duration_ms = Some(duration_ms as f64);
            clock = ended + Duration::milliseconds(200 + self.rng.below(2000) as i64);
            if failed {
                step.error_type = Some(
                    self.rng
                        .pick(&["Timeout", "RateLimited", "ServerError"])
                        .to_string(),
                );
                step.error_message =
                    Some(format!("{} failed: upstream returned an error", call.tool));
            } else {
                step.outputs = Some(call.outputs);
            }
            if let Some((which, instance)) = flow {
                let at = match instance_ok.iter().position(|i| i.1 == instance) {
                    Some(at) => at,
                    None => {
                        instance_ok.push((which, instance, true));
                        instance_ok.len() - 1
                    }
                };
                if failed {
                    instance_ok[at].2 = false;
                    if self.config.behaviours {
                        cut = Some(instance);
                    }
                }
            }
            if failed {
                self.truth.failed_steps += 1;
            }
            steps.push(step);
        }
        let mut counted = vec![false; self.truth.flows.len()];
        for (which, _, ok) in instance_ok {
            if ok {
                self.truth.flows[which].instances += 1;
                if !counted[which] {
                    counted[which] = true;
                    self.truth.flows[which].traces += 1;
                }
            }
        }
        let mut trace = trace;
        trace.ended_at = Some(clock);
        self.truth.traces += 1;
        self.truth.steps += steps.len() as u64;
        Some(TraceWithSteps { trace, steps })
    }

    fn blob(&mut self) -> String {
        // Payload sizes vary over three orders of magnitude, mostly small.
        let words = match self.rng.below(100) {
            0..=69 => 3 + self.rng.below(10),
            70..=97 => 20 + self.rng.below(200),
            _ => 1000 + self.rng.below(3000),
        };
        let mut text = String::new();
        for i in 0..words {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(self.rng.pick::<&str>(WORDS));
        }
        text
    }

    fn noise_call(&mut self) -> Call {
        let tool = *self.rng.pick(NOISE_TOOLS);
        let (inputs, outputs) = match tool {
            "think" => (json!({"thought": self.blob()}), json!({"ok": true})),
            "list_files" => {
                let dir = format!("/srv/{}", self.rng.pick(WORDS));
                let files: Vec<Value> = (0..1 + self.rng.below(5))
                    .map(|_| json!(format!("{dir}/{}.txt", self.rng.id("f"))))
                    .collect();
                (json!({"dir": dir}), json!({"files": files}))
            }
            "get_time" => (
                json!({"tz": "UTC"}),
                json!({"now": 1_700_000_000 + self.rng.below(1_000_000)}),
            ),
            "search_web" => (
                json!({"query": self.blob(), "limit": 5}),
                json!({"hits": [self.rng.id("url"), self.rng.id("url")]}),
            ),
            "read_file" => (
                json!({"path": format!("/tmp/{}.log", self.rng.id("log"))}),
                json!({"content": self.blob()}),
            ),
            _ => {
                let a = self.rng.below(1000);
                let b = self.rng.below(1000);
                (
                    json!({"expression": format!("{a} + {b}")}),
                    json!({"value": a + b}),
                )
            }
        };
        Call {
            tool,
            inputs,
            outputs,
        }
    }

    /// The decoy: `list_files -> read_file -> summarize`, each argument unrelated to the last.
    fn decoy_calls(&mut self) -> Vec<Call> {
        let dir = format!("/data/{}", self.rng.pick(WORDS));
        let listed = json!({"files": [self.rng.id("doc"), self.rng.id("doc")]});
        let path = format!("/other/{}.md", self.rng.id("unrelated"));
        let content = self.blob();
        let text = self.blob();
        vec![
            Call {
                tool: "list_files",
                inputs: json!({"dir": dir}),
                outputs: listed,
            },
            Call {
                tool: "read_file",
                inputs: json!({"path": path}),
                outputs: json!({"content": content}),
            },
            Call {
                tool: "summarize",
                inputs: json!({"text": text}),
                outputs: json!({"summary": self.blob()}),
            },
        ]
    }

    fn flow_calls(&mut self, which: usize) -> Vec<Call> {
        if which >= behaviours::FIRST {
            return behaviours::calls(&mut self.rng, which);
        }
        let rng = &mut self.rng;
        match which {
            // customer_orders: find_customer -> get_customer -> list_orders
            0 => {
                let email = format!("{}.{}@example.com", rng.pick(FIRST_NAMES), rng.id("u"));
                let customer_id = rng.id("cus");
                let name = format!("{} {}", rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES));
                let orders: Vec<Value> = (0..1 + rng.below(4))
                    .map(|_| json!(rng.id("ord")))
                    .collect();
                vec![
                    Call {
                        tool: "find_customer",
                        inputs: json!({"email": email}),
                        outputs: json!({"customer_id": customer_id}),
                    },
                    Call {
                        tool: "get_customer",
                        inputs: json!({"customer_id": customer_id}),
                        outputs: json!({"customer": {"id": customer_id, "name": name, "tier": rng.pick(&["gold", "silver"])}}),
                    },
                    Call {
                        tool: "list_orders",
                        inputs: json!({"customer_id": customer_id, "status": "open"}),
                        outputs: json!({"orders": orders}),
                    },
                ]
            }
            // doc_summary: search_docs -> fetch_doc (first hit) -> summarize
            1 => {
                let query = format!("{} {}", rng.pick(WORDS), rng.id("q"));
                let hits: Vec<Value> = (0..2 + rng.below(3))
                    .map(|_| json!({"id": rng.id("doc"), "score": rng.below(100)}))
                    .collect();
                let first = hits[0]["id"].clone();
                let body = format!("{} {}", rng.id("body"), rng.pick(WORDS));
                vec![
                    Call {
                        tool: "search_docs",
                        inputs: json!({"query": query, "limit": 10}),
                        outputs: json!({"results": hits}),
                    },
                    Call {
                        tool: "fetch_doc",
                        inputs: json!({"doc_id": first}),
                        outputs: json!({"title": rng.id("t"), "body": body}),
                    },
                    Call {
                        tool: "summarize",
                        inputs: json!({"text": body, "max_words": 50}),
                        outputs: json!({"summary": rng.id("s")}),
                    },
                ]
            }
            // weather_report: geocode -> get_forecast -> send_message (template)
            2 => {
                let city = (*rng.pick(CITIES)).to_string();
                let lat = format!("{}.{}", rng.below(80), rng.below(1000));
                let lon = format!("{}.{}", rng.below(170), rng.below(1000));
                let temp = rng.below(35) as i64 - 5;
                let channel = rng.id("chan");
                vec![
                    Call {
                        tool: "geocode",
                        inputs: json!({"city": city}),
                        outputs: json!({"lat": lat, "lon": lon}),
                    },
                    Call {
                        tool: "get_forecast",
                        inputs: json!({"lat": lat, "lon": lon}),
                        outputs: json!({"temperature": temp, "summary": rng.id("sky")}),
                    },
                    Call {
                        tool: "send_message",
                        inputs: json!({"channel": channel, "text": format!("Forecast for {city}: {temp} degrees")}),
                        outputs: json!({"message_id": rng.id("msg")}),
                    },
                ]
            }
            // deploy: create_release -> deploy_release -> notify (template with env)
            3 => {
                let version = format!("v{}.{}.{}", rng.below(5), rng.below(20), rng.below(50));
                let env = (*rng.pick(ENVS)).to_string();
                let release_id = rng.id("rel");
                vec![
                    Call {
                        tool: "create_release",
                        inputs: json!({"version": version}),
                        outputs: json!({"release_id": release_id}),
                    },
                    Call {
                        tool: "deploy_release",
                        inputs: json!({"release_id": release_id, "environment": env}),
                        outputs: json!({"deployment": {"id": rng.id("dep"), "url": format!("https://{env}.example.com")}}),
                    },
                    Call {
                        tool: "notify_team",
                        inputs: json!({"message": format!("Deployed {version} to {env}")}),
                        outputs: json!({"delivered": true}),
                    },
                ]
            }
            // ticket_triage: get_ticket -> classify_ticket -> assign_ticket
            4 => {
                let ticket = rng.id("tkt");
                let text = format!("{} {}", rng.id("issue"), rng.pick(WORDS));
                let team = (*rng.pick(&["billing", "infra", "mobile", "web"])).to_string();
                vec![
                    Call {
                        tool: "get_ticket",
                        inputs: json!({"ticket_id": ticket}),
                        outputs: json!({"ticket": {"id": ticket, "text": text}}),
                    },
                    Call {
                        tool: "classify_ticket",
                        inputs: json!({"text": text}),
                        outputs: json!({"team": team, "priority": rng.below(4)}),
                    },
                    Call {
                        tool: "assign_ticket",
                        inputs: json!({"ticket_id": ticket, "team": team}),
                        outputs: json!({"assigned": true}),
                    },
                ]
            }
            // invoice: get_invoice -> pay_invoice (amount and currency from the invoice)
            _ => {
                let invoice = rng.id("inv");
                let amount = format!("{}.{:02}", rng.below(5000), rng.below(100));
                let currency = (*rng.pick(&["EUR", "USD", "JPY"])).to_string();
                let account = rng.id("acct");
                let amount_value: Value = serde_json::from_str(&amount).unwrap_or(Value::Null);
                vec![
                    Call {
                        tool: "get_invoice",
                        inputs: json!({"invoice_id": invoice}),
                        outputs: json!({"invoice": {"id": invoice, "amount": amount_value, "currency": currency}}),
                    },
                    Call {
                        tool: "pay_invoice",
                        inputs: json!({"invoice_id": invoice, "amount": amount_value, "currency": currency, "account": account}),
                        outputs: json!({"payment_id": rng.id("pay"), "status": "settled"}),
                    },
                ]
            }
        }
    }
}

impl Iterator for Generator {
    type Item = TraceWithSteps;
    fn next(&mut self) -> Option<TraceWithSteps> {
        self.next_trace()
    }
}

fn binding(step: usize, field: &str, source: PlantedSource) -> PlantedBinding {
    PlantedBinding {
        step,
        field: field.to_string(),
        source,
    }
}

fn input(name: &str) -> PlantedSource {
    PlantedSource::FlowInput {
        name: name.to_string(),
    }
}

fn output(step: usize, pointer: &str) -> PlantedSource {
    PlantedSource::StepOutput {
        step,
        pointer: pointer.to_string(),
    }
}

fn flow(name: &str, tools: &[&str], bindings: Vec<PlantedBinding>) -> PlantedFlow {
    PlantedFlow {
        name: name.to_string(),
        tools: tools.iter().map(|tool| (*tool).to_string()).collect(),
        bindings,
        instances: 0,
        traces: 0,
        first_steps: Vec::new(),
        loop_step: None,
    }
}

/// The ground truth of the planted flows, in the order `flow_calls` numbers them.
fn planted_flows() -> Vec<PlantedFlow> {
    vec![
        flow(
            "customer_orders",
            &["find_customer", "get_customer", "list_orders"],
            vec![
                binding(0, "/email", input("email")),
                binding(1, "/customer_id", output(0, "/customer_id")),
                binding(2, "/customer_id", output(0, "/customer_id")),
                binding(
                    2,
                    "/status",
                    PlantedSource::Constant {
                        value: json!("open"),
                    },
                ),
            ],
        ),
        flow(
            "doc_summary",
            &["search_docs", "fetch_doc", "summarize"],
            vec![
                binding(0, "/query", input("query")),
                binding(0, "/limit", PlantedSource::Constant { value: json!(10) }),
                binding(
                    1,
                    "/doc_id",
                    PlantedSource::ListElement {
                        step: 0,
                        pointer: "/results".into(),
                    },
                ),
                binding(2, "/text", output(1, "/body")),
                binding(
                    2,
                    "/max_words",
                    PlantedSource::Constant { value: json!(50) },
                ),
            ],
        ),
        flow(
            "weather_report",
            &["geocode", "get_forecast", "send_message"],
            vec![
                binding(0, "/city", input("city")),
                binding(1, "/lat", output(0, "/lat")),
                binding(1, "/lon", output(0, "/lon")),
                binding(2, "/channel", input("channel")),
                binding(
                    2,
                    "/text",
                    PlantedSource::Template {
                        template: "Forecast for {{0.input/city}}: {{1.output/temperature}} degrees"
                            .into(),
                    },
                ),
            ],
        ),
        flow(
            "deploy",
            &["create_release", "deploy_release", "notify_team"],
            vec![
                binding(0, "/version", input("version")),
                binding(1, "/release_id", output(0, "/release_id")),
                binding(1, "/environment", input("environment")),
                binding(
                    2,
                    "/message",
                    PlantedSource::Template {
                        template: "Deployed {{0.input/version}} to {{1.input/environment}}".into(),
                    },
                ),
            ],
        ),
        flow(
            "ticket_triage",
            &["get_ticket", "classify_ticket", "assign_ticket"],
            vec![
                binding(0, "/ticket_id", input("ticket_id")),
                binding(1, "/text", output(0, "/ticket/text")),
                binding(
                    2,
                    "/ticket_id",
                    PlantedSource::StepInput {
                        step: 0,
                        pointer: "/ticket_id".into(),
                    },
                ),
                binding(2, "/team", output(1, "/team")),
            ],
        ),
        flow(
            "invoice_payment",
            &["get_invoice", "pay_invoice"],
            vec![
                binding(0, "/invoice_id", input("invoice_id")),
                // get_invoice's output echoes the id it was given: the cause is its input.
                binding(
                    1,
                    "/invoice_id",
                    PlantedSource::StepInput {
                        step: 0,
                        pointer: "/invoice_id".into(),
                    },
                ),
                binding(1, "/amount", output(0, "/invoice/amount")),
                binding(1, "/currency", output(0, "/invoice/currency")),
                binding(1, "/account", input("account")),
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(traces: u64, seed: u64) -> (Vec<TraceWithSteps>, GroundTruth) {
        let mut generator = Generator::new(GeneratorConfig {
            traces,
            seed,
            ..GeneratorConfig::default()
        });
        let all: Vec<_> = generator.by_ref().collect();
        (all, generator.ground_truth().clone())
    }

    #[test]
    fn interleaved_calls_sit_between_an_instance_s_calls_and_instances_still_count() {
        let mut generator = Generator::new(GeneratorConfig {
            traces: 300,
            seed: 4,
            interleave: 1.0,
            failure_rate: 0.0,
            decoy_rate: 0.0,
            ..GeneratorConfig::default()
        });
        let traces: Vec<_> = generator.by_ref().collect();
        let truth = generator.ground_truth().clone();
        for flow in &truth.flows {
            // Every instance is the flow's calls with exactly one unrelated call between two.
            let mut instances = 0;
            for trace in &traces {
                let tools: Vec<&str> = trace.steps.iter().map(|s| s.tool_name.as_str()).collect();
                let span = 2 * flow.tools.len() - 1;
                let mut at = 0;
                while at + span <= tools.len() {
                    let hit = flow
                        .tools
                        .iter()
                        .enumerate()
                        .all(|(i, tool)| tools[at + 2 * i] == tool.as_str());
                    if hit {
                        instances += 1;
                        at += span;
                    } else {
                        at += 1;
                    }
                }
            }
            assert_eq!(instances, flow.instances, "{}", flow.name);
            assert!(flow.instances > 0, "{}", flow.name);
        }
    }

    #[test]
    fn same_seed_same_traffic_other_seed_other_traffic() {
        let (a, _) = generate(50, 1);
        let (b, _) = generate(50, 1);
        let (c, _) = generate(50, 2);
        let text = |traces: &[TraceWithSteps]| serde_json::to_string(traces).unwrap();
        assert_eq!(text(&a), text(&b));
        assert_ne!(text(&a), text(&c));
    }

    #[test]
    fn ground_truth_counts_match_the_traces() {
        let (traces, truth) = generate(400, 9);
        assert_eq!(truth.traces, 400);
        assert_eq!(
            truth.steps,
            traces.iter().map(|t| t.steps.len() as u64).sum::<u64>()
        );
        let failed = traces
            .iter()
            .flat_map(|t| &t.steps)
            .filter(|s| s.is_error())
            .count() as u64;
        assert_eq!(truth.failed_steps, failed);
        assert!(failed > 0, "failures are planted");
        // Count complete contiguous instances of each planted flow independently.
        for flow in &truth.flows {
            let mut instances = 0;
            for trace in &traces {
                let tools: Vec<&str> = trace.steps.iter().map(|s| s.tool_name.as_str()).collect();
                for start in 0..tools.len() {
                    let window = &trace.steps[start..(start + flow.tools.len()).min(tools.len())];
                    if window.len() == flow.tools.len()
                        && window
                            .iter()
                            .zip(&flow.tools)
                            .all(|(s, t)| &s.tool_name == t && !s.is_error())
                    {
                        instances += 1;
                    }
                }
            }
            assert!(flow.instances > 0, "{} planted", flow.name);
            // Decoys share tools with no planted flow, so every complete window is an instance.
            assert_eq!(instances, flow.instances, "{}", flow.name);
        }
    }

    #[test]
    fn planted_bindings_hold_in_the_data() {
        let (traces, truth) = generate(300, 3);
        let flow = &truth.flows[0];
        let mut checked = 0;
        for trace in &traces {
            for window in trace.steps.windows(3) {
                if window
                    .iter()
                    .map(|s| s.tool_name.as_str())
                    .eq(flow.tools.iter().map(String::as_str))
                    && window.iter().all(|s| !s.is_error())
                {
                    let from = window[0]
                        .outputs
                        .as_ref()
                        .and_then(|o| o.pointer("/customer_id"));
                    assert_eq!(window[1].inputs.pointer("/customer_id"), from);
                    assert_eq!(window[2].inputs.pointer("/status"), Some(&json!("open")));
                    checked += 1;
                }
            }
        }
        assert!(checked > 10);
    }
}
