//! A Ballista cluster on this machine: one scheduler and several executors, each a real gRPC
//! and Arrow Flight server on a port of its own, started inside the calling process. For
//! trying `mine --engine ballista` without a cluster, and for tests that check a distributed
//! plan counts what the embedded one counts.
//!
//! The executors pull tasks from the scheduler and exchange shuffle partitions over Flight,
//! exactly as separate processes would; they stop with the caller's runtime.

use ballista_core::serde::BallistaCodec;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;

/// How long to wait for the scheduler to answer before giving up.
const CONNECT_ATTEMPTS: u32 = 100;

/// Start a scheduler and `executors` executors of `vcores` task slots each on the current
/// tokio runtime (they live as long as it does). Returns the scheduler's URL, as
/// `--scheduler` takes it (`df://localhost:PORT`).
pub async fn start_local_cluster(executors: usize, vcores: usize) -> Result<String, String> {
    let address = ballista_scheduler::standalone::new_standalone_scheduler()
        .await
        .map_err(|e| format!("cannot start a scheduler: {e}"))?;
    let endpoint = format!("http://localhost:{}", address.port());
    let mut attempts = 0;
    let scheduler = loop {
        match SchedulerGrpcClient::connect(endpoint.clone()).await {
            Ok(client) => break client,
            Err(_) if attempts < CONNECT_ATTEMPTS => {
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => return Err(format!("scheduler {endpoint} does not answer: {e}")),
        }
    };
    for _ in 0..executors.max(1) {
        ballista_executor::new_standalone_executor(
            scheduler.clone(),
            vcores.max(1),
            BallistaCodec::default(),
        )
        .await
        .map_err(|e| format!("cannot start an executor: {e}"))?;
    }
    Ok(format!("df://localhost:{}", address.port()))
}
