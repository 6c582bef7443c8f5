//! The flow registry: flows by `(name, version)` with a lifecycle, optionally persisted through a
//! store's document API (kind `flow`, key `name@version`).
//!
//! Lifecycle: `DRAFT -> ACTIVE <-> DEPRECATED`, and any status `-> RETIRED` (final). A registered
//! version is immutable: registering different content under the same `(name, version)` fails.

use std::collections::BTreeMap;
use std::fmt;

use chrono::Utc;
use serde_json::Value;

use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::store::TraceStore;
use chainweaver_recorder::workspace::Workspace;

use crate::error::{Error, Result};
use crate::flow::version_key;

pub use chainweaver_recorder::model::flow::{FlowStatus, RegisteredFlow};

/// Flows by `(name, version)`.
#[derive(Default)]
pub struct FlowRegistry {
    flows: BTreeMap<(String, String), RegisteredFlow>,
    store: Option<Box<dyn TraceStore>>,
}

impl fmt::Debug for FlowRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowRegistry")
            .field("flows", &self.flows.len())
            .field("persistent", &self.store.is_some())
            .finish()
    }
}

/// The store key of a flow version.
pub use chainweaver_recorder::workspace::flow_key as document_key;

impl FlowRegistry {
    /// An in-memory registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry persisted in `store`: loads every stored flow, and writes every change through.
    pub fn open(store: Box<dyn TraceStore>) -> Result<Self> {
        let mut flows = BTreeMap::new();
        for flow in store.flows()? {
            flows.insert(
                (
                    flow.definition.name().to_string(),
                    flow.definition.version().to_string(),
                ),
                flow,
            );
        }
        Ok(Self {
            flows,
            store: Some(store),
        })
    }

    fn persist(&mut self, flow: &RegisteredFlow) -> Result<()> {
        if let Some(store) = &mut self.store {
            store.put_flow(flow)?;
        }
        Ok(())
    }

    /// Register a flow version with a status. Registering identical content again only
    /// updates the status (when the lifecycle allows it); different content fails.
    pub fn register(&mut self, definition: FlowDefinition, status: FlowStatus) -> Result<()> {
        let key = (
            definition.name().to_string(),
            definition.version().to_string(),
        );
        let fail = |message: String| Error::Registry {
            name: key.0.clone(),
            version: key.1.clone(),
            message,
        };
        if key.0.trim().is_empty() {
            return Err(fail("a flow needs a name".into()));
        }
        if let Some(existing) = self.flows.get(&key) {
            if existing.definition != definition {
                return Err(fail(
                    "this version is already registered with different content; register a new version".into(),
                ));
            }
            return self.set_status(&key.0, &key.1, status);
        }
        let now = Utc::now();
        let flow = RegisteredFlow {
            status,
            registered_at: now,
            updated_at: now,
            definition,
        };
        self.persist(&flow)?;
        self.flows.insert(key, flow);
        Ok(())
    }

    /// Move a flow version to another lifecycle status.
    pub fn set_status(&mut self, name: &str, version: &str, status: FlowStatus) -> Result<()> {
        let key = (name.to_string(), version.to_string());
        let Some(current) = self.flows.get(&key) else {
            return Err(Error::FlowNotFound {
                name: name.to_string(),
                version: Some(version.to_string()),
            });
        };
        if current.status == status {
            return Ok(());
        }
        if !current.status.can_become(status) {
            return Err(Error::Registry {
                name: name.to_string(),
                version: version.to_string(),
                message: format!("cannot go from {} to {status}", current.status),
            });
        }
        let mut updated = current.clone();
        updated.status = status;
        updated.updated_at = Utc::now();
        self.persist(&updated)?;
        self.flows.insert(key, updated);
        Ok(())
    }

    /// One flow version.
    pub fn get(&self, name: &str, version: &str) -> Option<&RegisteredFlow> {
        self.flows.get(&(name.to_string(), version.to_string()))
    }

    /// The flow to run: the given version (unless retired), or the newest active version
    /// (the newest deprecated one when none is active).
    pub fn resolve(&self, name: &str, version: Option<&str>) -> Result<&RegisteredFlow> {
        let not_found = || Error::FlowNotFound {
            name: name.to_string(),
            version: version.map(str::to_string),
        };
        if let Some(version) = version {
            let flow = self.get(name, version).ok_or_else(not_found)?;
            if flow.status == FlowStatus::Retired {
                return Err(Error::Registry {
                    name: name.to_string(),
                    version: version.to_string(),
                    message: "is retired and cannot run".into(),
                });
            }
            return Ok(flow);
        }
        let newest = |status: FlowStatus| {
            self.versions(name)
                .into_iter()
                .filter(|f| f.status == status)
                .max_by_key(|f| version_key(f.definition.version()))
        };
        newest(FlowStatus::Active)
            .or_else(|| newest(FlowStatus::Deprecated))
            .ok_or_else(not_found)
    }

    /// Every version of one flow, oldest version first.
    pub fn versions(&self, name: &str) -> Vec<&RegisteredFlow> {
        let mut versions: Vec<&RegisteredFlow> = self
            .flows
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|(_, f)| f)
            .collect();
        versions.sort_by_key(|f| version_key(f.definition.version()));
        versions
    }

    /// Every flow version, by name then version.
    pub fn list(&self) -> Vec<&RegisteredFlow> {
        let mut all: Vec<&RegisteredFlow> = self.flows.values().collect();
        all.sort_by(|a, b| {
            (a.definition.name(), version_key(a.definition.version()))
                .cmp(&(b.definition.name(), version_key(b.definition.version())))
        });
        all
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The registry's document for a flow version, as stored.
    pub fn document(&self, name: &str, version: &str) -> Option<Value> {
        self.get(name, version)
            .and_then(|f| serde_json::to_value(f).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(version: &str, tool: &str) -> FlowDefinition {
        FlowDefinition::from_value(
            json!({"name": "calc", "version": version, "steps": [{"tool_name": tool}]}),
        )
        .unwrap()
    }

    #[test]
    fn lifecycle_and_resolution() {
        let mut registry = FlowRegistry::new();
        registry
            .register(flow("1.0.0", "a"), FlowStatus::Active)
            .unwrap();
        registry
            .register(flow("1.10.0", "b"), FlowStatus::Draft)
            .unwrap();
        registry
            .register(flow("1.2.0", "c"), FlowStatus::Active)
            .unwrap();
        assert_eq!(
            registry.resolve("calc", None).unwrap().definition.version(),
            "1.2.0"
        );
        registry
            .set_status("calc", "1.10.0", FlowStatus::Active)
            .unwrap();
        assert_eq!(
            registry.resolve("calc", None).unwrap().definition.version(),
            "1.10.0"
        );
        registry
            .set_status("calc", "1.10.0", FlowStatus::Retired)
            .unwrap();
        assert!(registry.resolve("calc", Some("1.10.0")).is_err());
        assert!(
            registry
                .set_status("calc", "1.10.0", FlowStatus::Active)
                .is_err(),
            "retired is final"
        );
        assert!(
            registry
                .set_status("calc", "1.2.0", FlowStatus::Draft)
                .is_err(),
            "no way back to draft"
        );
        let err = registry
            .register(flow("1.0.0", "zzz"), FlowStatus::Active)
            .unwrap_err();
        assert!(err.to_string().contains("different content"), "{err}");
        registry
            .register(flow("1.0.0", "a"), FlowStatus::Deprecated)
            .unwrap();
        assert_eq!(
            registry.get("calc", "1.0.0").unwrap().status,
            FlowStatus::Deprecated
        );
        assert!(matches!(
            registry.resolve("nope", None),
            Err(Error::FlowNotFound { .. })
        ));
    }

    #[test]
    fn status_serializes_upper_case() {
        assert_eq!(
            serde_json::to_value(FlowStatus::Deprecated).unwrap(),
            json!("DEPRECATED")
        );
        assert_eq!(FlowStatus::parse("Active"), Some(FlowStatus::Active));
    }
}
