//! Behaviour traffic: planted flows that are hard the way real agents are hard. A loop over a
//! whole list, a loop over the elements the agent picks, a first step that comes in two
//! interchangeable kinds, and a step that only echoes an argument. Generated only with
//! [`GeneratorConfig::behaviours`](super::GeneratorConfig::behaviours), so the default traffic
//! (and the samples made from it) stay as they were.

use serde_json::{Value, json};

use super::{Call, PlantedFlow, PlantedSource, Rng, binding, flow, input, output};

/// The first of the behaviour flows' numbers in [`super::GroundTruth::flows`].
pub(super) const FIRST: usize = 6;

/// Ground truth of the behaviour flows, numbered from [`FIRST`] in this order.
pub(super) fn planted() -> Vec<PlantedFlow> {
    let mut account_orders = flow(
        "account_orders",
        &["find_account_by_email", "get_account", "get_order"],
        vec![
            binding(0, "/email", input("email")),
            binding(1, "/account_id", output(0, "/account_id")),
            binding(
                2,
                "/order_id",
                PlantedSource::Each {
                    step: 1,
                    list_pointer: "/orders".into(),
                    item_pointer: String::new(),
                    selected: false,
                },
            ),
        ],
    );
    account_orders.first_steps = vec![
        "find_account_by_email".into(),
        "find_account_by_phone".into(),
    ];
    account_orders.loop_step = Some(2);

    let mut ticket_review = flow(
        "ticket_review",
        &["list_tickets", "read_ticket"],
        vec![
            binding(0, "/queue", input("queue")),
            binding(
                1,
                "/ticket_id",
                PlantedSource::Each {
                    step: 0,
                    list_pointer: "/tickets".into(),
                    item_pointer: "/id".into(),
                    selected: true,
                },
            ),
        ],
    );
    ticket_review.loop_step = Some(1);

    let product_ranking = flow(
        "product_ranking",
        &["search_products", "note_query", "rank_products"],
        vec![
            binding(0, "/query", input("query")),
            // note_query echoes the query back; the cause of rank_products' query is the
            // first step's argument, not the echo.
            binding(
                1,
                "/query",
                PlantedSource::StepInput {
                    step: 0,
                    pointer: "/query".into(),
                },
            ),
            binding(
                2,
                "/query",
                PlantedSource::StepInput {
                    step: 0,
                    pointer: "/query".into(),
                },
            ),
            binding(2, "/product_ids", output(0, "/hits")),
        ],
    );
    vec![account_orders, ticket_review, product_ranking]
}

/// One instance of behaviour flow `which` (numbered from [`FIRST`]).
pub(super) fn calls(rng: &mut Rng, which: usize) -> Vec<Call> {
    match which - FIRST {
        0 => account_orders(rng),
        1 => ticket_review(rng),
        _ => product_ranking(rng),
    }
}

fn account_orders(rng: &mut Rng) -> Vec<Call> {
    let account_id = rng.id("acct");
    let (tool, inputs) = if rng.chance(0.5) {
        (
            "find_account_by_email",
            json!({"email": format!("{}@example.org", rng.id("m"))}),
        )
    } else {
        (
            "find_account_by_phone",
            json!({"phone": format!("+1-555-{}", rng.below(10_000))}),
        )
    };
    let orders: Vec<String> = (0..1 + rng.below(4)).map(|_| rng.id("ord")).collect();
    let mut calls = vec![
        Call {
            tool,
            inputs,
            outputs: json!({"account_id": account_id}),
        },
        Call {
            tool: "get_account",
            inputs: json!({"account_id": account_id}),
            outputs: json!({"account_id": account_id, "tier": rng.below(3), "orders": orders}),
        },
    ];
    // The agent reads every order, in the order listed.
    for order in &orders {
        calls.push(Call {
            tool: "get_order",
            inputs: json!({"order_id": order}),
            outputs: json!({"order_id": order, "total": rng.below(500), "status": "shipped"}),
        });
    }
    calls
}

fn ticket_review(rng: &mut Rng) -> Vec<Call> {
    let queue = format!("queue-{}", rng.id("q"));
    let tickets: Vec<Value> = (0..3 + rng.below(4))
        .map(|_| json!({"id": rng.id("tkt"), "priority": rng.below(5)}))
        .collect();
    let mut calls = vec![Call {
        tool: "list_tickets",
        inputs: json!({"queue": queue}),
        outputs: json!({"tickets": tickets}),
    }];
    // The agent reads the tickets it picks (at least one), in list order.
    let mut picked: Vec<&Value> = tickets.iter().filter(|_| rng.chance(0.5)).collect();
    if picked.is_empty() {
        picked.push(&tickets[rng.below(tickets.len() as u64) as usize]);
    }
    for ticket in picked {
        calls.push(Call {
            tool: "read_ticket",
            inputs: json!({"ticket_id": ticket["id"]}),
            outputs: json!({"ticket_id": ticket["id"], "body": rng.id("body")}),
        });
    }
    calls
}

fn product_ranking(rng: &mut Rng) -> Vec<Call> {
    let query = format!("{} {}", rng.id("item"), rng.below(100));
    let hits: Vec<String> = (0..2 + rng.below(3)).map(|_| rng.id("sku")).collect();
    vec![
        Call {
            tool: "search_products",
            inputs: json!({"query": query}),
            outputs: json!({"hits": hits}),
        },
        Call {
            tool: "note_query",
            inputs: json!({"query": query}),
            outputs: json!({"noted": query}),
        },
        Call {
            tool: "rank_products",
            inputs: json!({"query": query, "product_ids": hits}),
            outputs: json!({"ranked": hits.iter().rev().collect::<Vec<_>>()}),
        },
    ]
}
