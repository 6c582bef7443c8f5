//! Flow definitions: linear flows and DAG flows as plain serde data.
