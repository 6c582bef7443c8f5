//! A Ballista cluster's parts: a scheduler and executors as processes of their own
//! ([`run_scheduler`], [`run_executor`]: `chainweaver cluster scheduler|executor`), or a whole
//! cluster inside the calling process ([`start_local_cluster`]) for trying `mine --engine
//! ballista` and for tests that check a distributed plan counts what the embedded one counts.
//!
//! Either way the executors pull tasks from the scheduler and exchange shuffle partitions over
//! Arrow Flight, each on a port of its own.

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

/// The shortest executor timeout a scheduler takes, in seconds: an executor whose task slots
/// are all busy still polls the scheduler, its only heartbeat, every 5 s.
pub const MIN_EXECUTOR_TIMEOUT_SECS: u64 = 10;

/// A scheduler as a process of its own serves: where it listens, and how soon it gives up on an
/// executor that stopped polling.
#[derive(Debug, Clone)]
pub struct SchedulerSettings {
    /// The address its gRPC service binds, e.g. `0.0.0.0:50050`.
    pub bind: std::net::SocketAddr,
    /// The name executors and clients reach it by (what `--scheduler df://HOST:PORT` says).
    pub external_host: String,
    /// An executor not heard from for this long is dropped, and the tasks it held (and the
    /// shuffle output it served) are run again on the others. At least
    /// [`MIN_EXECUTOR_TIMEOUT_SECS`].
    pub executor_timeout: std::time::Duration,
}

/// Run a Ballista scheduler until its server stops: executors poll it for tasks, clients
/// (`mine --engine ballista`) submit their plans to it. Cluster state is kept in memory.
pub async fn run_scheduler(settings: &SchedulerSettings) -> crate::Result<()> {
    let failed = |message: String| crate::AnalyzerError::Engine {
        engine: "Ballista",
        source_name: format!("scheduler {}", settings.bind),
        message,
    };
    // A busy executor polls (its heartbeat) only every 5 s: a shorter timeout drops live ones.
    let timeout = settings
        .executor_timeout
        .as_secs()
        .max(MIN_EXECUTOR_TIMEOUT_SECS);
    let config = ballista_scheduler::config::SchedulerConfig {
        bind_host: settings.bind.ip().to_string(),
        bind_port: settings.bind.port(),
        external_host: settings.external_host.clone(),
        scheduling_policy: ballista_core::config::TaskSchedulingPolicy::PullStaged,
        executor_timeout_seconds: timeout,
        // Checked often enough that a lost executor is noticed within the timeout.
        expire_dead_executor_interval_seconds: (timeout / 4).max(1),
        no_executors_grace_period_seconds: timeout,
        ..Default::default()
    };
    let cluster = ballista_scheduler::cluster::BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| failed(e.to_string()))?;
    ballista_scheduler::scheduler_process::start_server(
        cluster,
        settings.bind,
        std::sync::Arc::new(config),
    )
    .await
    .map_err(|e| failed(e.to_string()))
}

/// An executor as a process of its own: the scheduler it polls, where it serves shuffle
/// partitions to the other executors, and how many tasks it runs at once.
#[derive(Debug, Clone)]
pub struct ExecutorSettings {
    /// The scheduler's host and port (from `df://HOST:PORT`).
    pub scheduler_host: String,
    pub scheduler_port: u16,
    /// The address its Arrow Flight service binds (the host), and the name the other
    /// executors and the client reach it by.
    pub bind_host: String,
    pub external_host: Option<String>,
    /// Its Arrow Flight port (shuffle partitions) and gRPC port.
    pub flight_port: u16,
    pub grpc_port: u16,
    /// Tasks it runs at once.
    pub slots: usize,
    /// Where it writes shuffle partitions and spills (default: a fresh folder in `TMPDIR`,
    /// removed when the executor stops).
    pub work_dir: Option<std::path::PathBuf>,
}

/// Run a Ballista executor until it is stopped (a signal, or the scheduler telling it to):
/// it polls the scheduler for tasks, runs them, and serves their output over Arrow Flight.
pub async fn run_executor(settings: &ExecutorSettings) -> crate::Result<()> {
    let endpoint = format!("{}:{}", settings.bind_host, settings.flight_port);
    let failed = |message: String| crate::AnalyzerError::Engine {
        engine: "Ballista",
        source_name: format!("executor {endpoint}"),
        message,
    };
    // Owned here, so a folder of our own goes when the executor stops.
    let scratch;
    let work_dir = match &settings.work_dir {
        Some(dir) => dir.as_path(),
        None => {
            scratch = super::scratch_folder("chainweaver-executor-")
                .map_err(|e| failed(format!("cannot make a work folder in TMPDIR: {e}")))?;
            scratch.path()
        }
    };
    let work_dir = work_dir
        .to_str()
        .ok_or_else(|| failed(format!("{} is not UTF-8", work_dir.display())))?
        .to_string();
    let config = ballista_executor::executor_process::ExecutorProcessConfig {
        bind_host: settings.bind_host.clone(),
        external_host: settings.external_host.clone(),
        port: settings.flight_port,
        grpc_port: settings.grpc_port,
        scheduler_host: settings.scheduler_host.clone(),
        scheduler_port: settings.scheduler_port,
        // Wait for a scheduler that is still starting.
        scheduler_connect_timeout_seconds: 30,
        vcores: settings.slots.max(1),
        task_scheduling_policy: ballista_core::config::TaskSchedulingPolicy::PullStaged,
        work_dir: Some(work_dir),
        print_thread_info: false,
        ..Default::default()
    };
    ballista_executor::executor_process::start_executor_process(std::sync::Arc::new(config))
        .await
        .map_err(|e| failed(e.to_string()))
}
