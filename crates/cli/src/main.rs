//! `stolr`: stochastic low-rank learning from the command line.
//!
//! `stolr kpca` runs kernel PCA (SKPCA, exact, or Nyström) on a data file or a built-in
//! generated dataset and writes `.npy` files, a model and a JSON report; `stolr pca` does the
//! same for linear and streaming PCA; `stolr krr` runs kernel ridge regression by SLKL (paper
//! 004) or a baseline on a train/test split. `stolr transform` and `stolr predict` apply a saved
//! model to new rows; `stolr inverse-transform` maps points of a kernel PCA embedding back.

mod apply;
mod common;
mod distributed;
mod kpca;
mod krr;
mod memory;
mod pca;
mod plot;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Stochastic low-rank learning: kernel PCA that keeps memory linear in n.
#[derive(Debug, Parser)]
#[command(name = "stolr", version, about, long_about = None)]
struct Cli {
    /// Worker threads for the linear algebra and element-wise passes (0: one per core).
    #[arg(long, global = true, default_value_t = 0)]
    threads: usize,
    /// Memory the run may allocate, e.g. 2G or 500M (binary units). Every allocation whose size
    /// follows from the data or a parameter is estimated first; over the limit the run stops
    /// with an error before doing the work. Default: 80 % of the memory available at the start.
    #[arg(long, global = true, value_name = "SIZE", value_parser = stolr_memory::parse_size)]
    memory_limit: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Kernel PCA of a dataset (SKPCA by default; exact and Nyström baselines).
    Kpca(Box<kpca::KpcaArgs>),
    /// Linear PCA (SVRG-PCA with Barzilai–Borwein steps by default; VR-PCA and exact).
    Pca(Box<pca::PcaArgs>),
    /// Kernel ridge regression (SLKL by default; KRR on all points, on the landmarks, Unif).
    Krr(Box<krr::KrrArgs>),
    /// Projections of new rows on a saved kernel PCA or PCA model (writes projections.npy).
    Transform(apply::ApplyArgs),
    /// Predictions of a saved kernel regression model for new rows (writes predictions.npy).
    Predict(apply::ApplyArgs),
    /// Pre-images of points of a kernel PCA embedding by a model fitted with
    /// --fit-inverse-transform (writes preimages.npy).
    InverseTransform(apply::ApplyArgs),
}

fn main() -> std::process::ExitCode {
    // Under `mpirun` (built with `--features mpi`): MPI first, so that every rank's failure ends
    // the whole job (a panic, or an error below, aborts every rank instead of leaving the others
    // waiting in a collective).
    #[cfg(feature = "mpi")]
    let mpi = stolr_mpi::Mpi::init().map(std::rc::Rc::new);
    #[cfg(feature = "mpi")]
    let world: Option<std::rc::Rc<dyn stolr_comm::Communicator>> = match &mpi {
        Some(world) if stolr_comm::Communicator::size(&**world) > 1 => {
            stolr_mpi::abort_on_panic(stolr_comm::Communicator::rank(&**world));
            Some(world.clone())
        }
        _ => None,
    };
    #[cfg(not(feature = "mpi"))]
    let world = None;
    // The world is dropped (by `run`) before MPI is finalized (by `mpi`, last).
    run(world)
}

/// `--threads` (0: one per core) bounded by the `cores` this process may run on
/// (`std::thread::available_parallelism`, which follows the CPU affinity mask and cgroup
/// quotas): more threads than cores only add switching and memory (`--threads 10000` spawned
/// about 9000 threads and took a minute on 200 rows), and the results are the same bits for
/// any number of threads. A clamped value is said on stderr.
fn clamp_threads(requested: usize, cores: usize) -> usize {
    let cores = cores.max(1);
    if requested > cores {
        eprintln!(
            "warning: --threads {requested} is more than the {cores} cores available to this process; using {cores}"
        );
        cores
    } else {
        requested
    }
}

fn run(world: Option<std::rc::Rc<dyn stolr_comm::Communicator>>) -> std::process::ExitCode {
    let command = Cli::command();
    let matches = command.clone().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Some((name, sub)) = matches.subcommand()
        && let Some(definition) = command.find_subcommand(name)
    {
        common::checkpoint::record_options(definition, sub);
    }
    let threads = clamp_threads(cli.threads, std::thread::available_parallelism().map_or(1, usize::from));
    if threads == 1 {
        faer::set_global_parallelism(faer::Par::Seq);
    } else if threads > 1 {
        // faer and the element-wise passes share rayon's global pool.
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global() {
            eprintln!("warning: cannot size the thread pool: {e}");
        }
        faer::set_global_parallelism(faer::Par::rayon(threads));
    }
    // The run's budget travels in the context: every reader and model load is given it.
    let memory = cli.memory_limit.map(stolr_memory::MemoryBudget::bytes).unwrap_or_default();
    let ctx = distributed::RunContext { memory, world };
    // --out and --checkpoint are claimed (locked, write-tested) before any work, on the rank
    // that writes (transform and predict claim --out once they know the model's folder).
    let writer = ctx.is_writer();
    let claimed = match matches.subcommand() {
        Some((name, sub)) if writer && !matches!(name, "transform" | "predict" | "inverse-transform") => {
            let path = |id: &str| sub.try_get_one::<std::path::PathBuf>(id).ok().flatten().map(|p| p.as_path());
            common::output::claim(path("out"), path("checkpoint"), None)
        }
        _ => Ok(()),
    };
    let result = claimed.and_then(|()| match cli.command {
        Command::Kpca(args) => kpca::run(*args, &ctx),
        Command::Pca(args) => pca::run(*args, &ctx),
        Command::Krr(args) => krr::run(*args, &ctx),
        Command::Transform(args) if ctx.world.is_some() => apply::transform_sharded(args, &ctx),
        Command::Transform(args) => apply::transform(args, ctx.memory),
        Command::Predict(args) if ctx.world.is_some() => apply::predict_sharded(args, &ctx),
        Command::Predict(args) => apply::predict(args, ctx.memory),
        Command::InverseTransform(args) => apply::inverse_transform(args, &ctx),
    });
    // The new output set replaces the old one only after the whole command succeeded.
    let result = result.and_then(|()| common::output::commit());
    common::output::release();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            let interrupted = matches!(err.downcast_ref(), Some(stolr_solvers::SolverError::Interrupted { .. }));
            if let Some(comm) = ctx.world.as_ref().filter(|_| interrupted) {
                // Every rank agreed to stop after the same iteration and saved its part of the
                // checkpoint (the stop is collective): they all end alike, without an abort.
                if comm.is_root() {
                    eprintln!("error: {err}");
                }
                return std::process::ExitCode::from(130);
            }
            if let Some(comm) = &ctx.world {
                // One rank failed: say which, and end every rank (the others may be waiting
                // for it in a collective).
                // One write of the whole message: mpirun relays every rank's stderr into one
                // stream, and a message written piece by piece interleaves with the others'.
                let mut message = format!("error (rank {} of {}): {err}\n", comm.rank(), comm.size());
                for cause in err.chain().skip(1) {
                    message.push_str(&format!("  caused by: {cause}\n"));
                }
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), message.as_bytes());
                // mpirun relays a rank's output asynchronously: leave it time to pass the message
                // on before the abort ends every process.
                std::thread::sleep(std::time::Duration::from_millis(300));
                distributed::abort(1);
            }
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            let over_budget = err.chain().any(|e| {
                matches!(e.downcast_ref(), Some(stolr_memory::MemoryError::OverBudget { .. }))
                    || matches!(e.downcast_ref(), Some(stolr_solvers::SolverError::Memory(_)))
            });
            if interrupted {
                return std::process::ExitCode::from(130);
            }
            if over_budget {
                eprintln!(
                    "  hint: --memory-limit SIZE sets the limit (now {}); a stochastic solver (skpca, nystrom) needs less",
                    stolr_memory::format_bytes(ctx.memory.limit())
                );
            }
            std::process::ExitCode::FAILURE
        }
    }
}
