//! `chainweaver cluster scheduler|executor`: the parts of a Ballista cluster for `mine --engine
//! ballista`, from the same build as the client, so their Ballista and DataFusion versions
//! match the plans it sends.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::Global;

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// A scheduler: clients (`mine --engine ballista --scheduler df://HOST:PORT`) submit their
    /// plans to it, executors poll it for tasks. Runs until stopped (Ctrl-C, SIGTERM).
    ///
    /// An executor not heard from for --executor-timeout seconds is dropped: the tasks it
    /// held, and the stages whose output it served, run again on the others, so a query
    /// outlives the loss of an executor while one is left.
    Scheduler(SchedulerArgs),
    /// An executor: runs the plans' tasks and serves their output to the other executors over
    /// Arrow Flight. Runs until stopped (Ctrl-C, SIGTERM) or told to by the scheduler.
    ///
    /// It reads the Parquet files at the paths the client lists, so the store must be at the
    /// same path on its machine (a shared file system or a mounted bucket).
    Executor(ExecutorArgs),
}

#[derive(Debug, clap::Args)]
pub struct SchedulerArgs {
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:50050")]
    pub bind: SocketAddr,
    /// The name executors and clients reach this machine by.
    #[arg(long, value_name = "HOST", default_value = "localhost")]
    pub external_host: String,
    /// Seconds without a poll after which an executor counts as lost. A busy executor polls
    /// every 5 s, so at least 10.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(10..))]
    pub executor_timeout: u64,
}

#[derive(Debug, clap::Args)]
pub struct ExecutorArgs {
    /// The scheduler to poll, as `mine --scheduler` takes it: `df://HOST:PORT`.
    #[arg(long, value_name = "URL", value_parser = scheduler_address)]
    pub scheduler: SchedulerAddress,
    /// The host to listen on.
    #[arg(long, value_name = "HOST", default_value = "0.0.0.0")]
    pub bind_host: String,
    /// The name the other executors reach this one by (default: the address the scheduler
    /// sees its polls come from).
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// The Arrow Flight port, where the other executors fetch this one's shuffle output.
    #[arg(long, value_name = "PORT", default_value_t = 50051)]
    pub port: u16,
    /// The gRPC port.
    #[arg(long, value_name = "PORT", default_value_t = 50052)]
    pub grpc_port: u16,
    /// Tasks run at once (default: the machine's cores).
    #[arg(long, value_name = "N")]
    pub slots: Option<usize>,
    /// Where shuffle output and spills go (default: a fresh folder in TMPDIR, removed at exit).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// A scheduler's host and port, from `df://HOST:PORT` (or `HOST:PORT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerAddress {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for SchedulerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "df://{}:{}", self.host, self.port)
    }
}

fn scheduler_address(url: &str) -> Result<SchedulerAddress, String> {
    let bare = url.strip_prefix("df://").unwrap_or(url);
    // clap prints the value given beside this.
    let bad = || "expected df://HOST:PORT, e.g. df://scheduler:50050".to_string();
    let (host, port) = bare.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse::<u16>().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok(SchedulerAddress {
        host: host.to_string(),
        port,
    })
}

#[cfg(not(feature = "ballista"))]
pub fn run(_: ClusterCommand, _: &Global) -> anyhow::Result<u8> {
    use super::{Failure, exit};
    Err(Failure {
        code: exit::USAGE,
        message: "this chainweaver was built without the Ballista engine".into(),
        hint: Some("build it with `cargo build --release --features ballista`".into()),
    }
    .into())
}

#[cfg(feature = "ballista")]
pub fn run(command: ClusterCommand, global: &Global) -> anyhow::Result<u8> {
    use anyhow::Context;
    use chainweaver_analyzer::engine::ballista;

    // Ballista's own log (jobs, stages, lost executors) on stderr: warnings by default.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the cluster's runtime")?;
    match command {
        ClusterCommand::Scheduler(args) => {
            let settings = ballista::SchedulerSettings {
                bind: args.bind,
                external_host: args.external_host.clone(),
                executor_timeout: std::time::Duration::from_secs(args.executor_timeout),
            };
            if !global.quiet {
                let url = SchedulerAddress {
                    host: args.external_host.clone(),
                    port: args.bind.port(),
                };
                eprintln!(
                    "cluster: scheduler listening on {}; clients use --scheduler {url}, executors `chainweaver cluster executor --scheduler {url}`",
                    args.bind
                );
            }
            runtime.block_on(ballista::run_scheduler(&settings))?;
        }
        ClusterCommand::Executor(args) => {
            let settings = ballista::ExecutorSettings {
                scheduler_host: args.scheduler.host.clone(),
                scheduler_port: args.scheduler.port,
                bind_host: args.bind_host.clone(),
                external_host: args.external_host,
                flight_port: args.port,
                grpc_port: args.grpc_port,
                slots: args
                    .slots
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
                work_dir: args.work_dir,
            };
            if !global.quiet {
                eprintln!(
                    "cluster: executor on {}:{} polling {}",
                    args.bind_host, args.port, args.scheduler
                );
            }
            runtime.block_on(ballista::run_executor(&settings))?;
        }
    }
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::{SchedulerAddress, scheduler_address};

    #[test]
    fn a_scheduler_url_is_a_host_and_a_port() {
        let address = |host: &str, port| {
            Ok(SchedulerAddress {
                host: host.to_string(),
                port,
            })
        };
        assert_eq!(
            scheduler_address("df://sched.internal:50050"),
            address("sched.internal", 50050)
        );
        assert_eq!(scheduler_address("localhost:7"), address("localhost", 7));
        assert_eq!(
            scheduler_address("df://sched.internal:50050").map(|a| a.to_string()),
            Ok("df://sched.internal:50050".to_string())
        );
        for bad in [
            "df://host",
            "df://:50050",
            "df://host:port",
            "df://host:70000",
        ] {
            assert_eq!(
                scheduler_address(bad),
                Err("expected df://HOST:PORT, e.g. df://scheduler:50050".to_string()),
                "{bad}"
            );
        }
    }
}
