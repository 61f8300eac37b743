//! `datastore-entity-server`: Google's Datastore API on a port, answered by the embedded
//! engine, in memory or in a file. Any client of the service (or of its emulators) uses it
//! through `DATASTORE_EMULATOR_HOST`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datastore_entity::backend::embedded::Embedded;
use datastore_entity_server::export::{self, ExportError, Filter, Progress};
use datastore_entity_server::serve::Service;
use datastore_entity_server::{DEFAULT_CACHE_BYTES, Options, Server};
use tracing_subscriber::filter::Targets;

const USAGE: &str = "usage: datastore-entity-server [--host HOST] [--port PORT] [--data FILE]
       datastore-entity-server export --data FILE --to DIR --project PROJECT
                                      [--kinds K1,K2] [--namespaces N1,N2]

  --host HOST   the address to listen on (default 127.0.0.1)
  --port PORT   the port (default 8081; 0 picks a free one)
  --data FILE   keep the data in FILE (created if missing; in memory, compressed,
                otherwise)
  --require-indexes FILE
                serve only the queries the composite indexes of this index.yaml serve
                (as the service does); every query otherwise, as the Firestore emulator
  --no-build-indexes
                without --require-indexes, a query needing a composite index reads
                entities until its page fills; by default the index is built on the
                query's first use (from the kind's entities, a slice per query), so that
                it and the next ones cost what they return
  --cache-mib MIB
                the page cache of the --data file, in MiB (default 64)
  --keep-versions SECONDS
                keep past versions this long, for reads at a read_time (default 3600;
                0 keeps none but those open transactions read)
  --versions-mib MIB
                the most memory past versions take, in MiB (default 64): past it the
                oldest go first, and a transaction whose snapshot needs more aborts
  --import PATH
                import a managed export (its .overall_export_metadata, or the folder
                holding it: what gcloud datastore export and the emulators write) once
                the server listens, printing the entities and bytes read so far; a
                damaged file stops it (the batches committed before stay)
  --project PROJECT
                the project --import goes into (default: the export's own)
  --log FILTER  what is logged on standard error (default warn: a failed checkpoint or
                pack, a shutdown that closed unfinished requests): a level of the server
                and its engine (off, error, warn, info, debug: each request with its
                status and time; trace), the libraries under them staying at warn; or
                levels by module (warn,datastore_entity_server=debug,h2=debug)

export: writes the entities of PROJECT in the --data FILE (the server not running on it)
as a managed export in a new folder under DIR, which --import and the legacy emulator's
:import read (and gcloud datastore import, once copied to a bucket). --kinds and
--namespaces (\"\" for the default one) take only those, as the admin API's entity filter;
--log as the server's.

Serves the Datastore API over gRPC and, on the same port, its REST form:
POST /v1/projects/{project}:{method} (lookup, runQuery, commit, ..., and :export with
{\"outputUrlPrefix\": \"/abs/dir\"}, :import with {\"inputUrl\": \"/abs/...metadata\"}).
Stops on Ctrl-C or POST /shutdown; POST /reset drops all data; GET / answers Ok.";

/// What the command line asks.
enum Command {
    /// Serve, importing an export first if asked.
    Serve(Options, Option<Import>),
    /// Write an export of a data file.
    Export(ExportArgs),
}

/// The default of `--log`: warnings and errors only.
const DEFAULT_LOG: &str = "warn";

/// The filter of `--log` `text`: a level of the server and its engine (every module whose path
/// starts with `datastore_entity`), the libraries under them (hyper, h2: a line per HTTP/2
/// frame at debug) at most at warn; or levels by module (`warn,datastore_entity=debug`). A
/// word that is not a level is refused (tracing-subscriber would take it as a module's name,
/// silently logging nothing else).
fn log_filter(text: &str) -> Result<Targets, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let is_level = |word: &str| LEVELS.contains(&word.to_ascii_lowercase().as_str());
    let valid = text.split(',').all(|part| match part.split_once('=') {
        Some((module, level)) => !module.is_empty() && is_level(level),
        None => is_level(part),
    });
    let refused = || {
        format!(
            "--log {text}: not a filter (a level: {}; or module=level, separated by commas)",
            LEVELS.join(", ")
        )
    };
    if !valid {
        return Err(refused());
    }
    let text = match text.to_ascii_lowercase().as_str() {
        level @ ("info" | "debug" | "trace") => format!("warn,datastore_entity={level}"),
        _ => text.to_owned(),
    };
    text.parse().map_err(|_| refused())
}

/// Prints what `filter` lets through on standard error. A closed one loses the lines, as
/// [`say`] does, and stops nothing: the subscriber would report a failed write with
/// `eprintln!`, which panics on that same closed output.
fn install_log(filter: Targets) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .log_internal_errors(false),
        )
        .with(filter)
        .init();
}

struct Import {
    path: PathBuf,
    project: Option<String>,
}

#[derive(Default)]
struct ExportArgs {
    data: Option<PathBuf>,
    log: Option<Targets>,
    to: Option<PathBuf>,
    project: Option<String>,
    filter: Filter,
}

/// What the command line asks, and the filter of what is logged.
fn command() -> Result<(Command, Targets), String> {
    let mut args = std::env::args().skip(1).peekable();
    let mut log = None;
    let command = if args.peek().map(String::as_str) == Some("export") {
        args.next();
        let mut export = export_args(args)?;
        log = export.log.take();
        Command::Export(export)
    } else {
        serve_args(args, &mut log)?
    };
    let log = match log {
        Some(log) => log,
        None => log_filter(DEFAULT_LOG)?,
    };
    Ok((command, log))
}

/// Walks the flags of `args` (`--name value` or `--name=value`), handing each name to `each`
/// with whether its value was inline and a way to take its value; `--help` stops with an
/// empty error.
fn each_flag(
    mut args: impl Iterator<Item = String>,
    mut each: impl FnMut(&str, bool, &mut dyn FnMut() -> Result<String, String>) -> Result<(), String>,
) -> Result<(), String> {
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        if name == "--help" || name == "-h" {
            return Err(String::new());
        }
        let inlined = inline.is_some();
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        each(&name, inlined, &mut value)?;
    }
    Ok(())
}

fn export_args(args: impl Iterator<Item = String>) -> Result<ExportArgs, String> {
    let mut out = ExportArgs::default();
    let list = |text: String| text.split(',').map(str::to_owned).collect::<Vec<_>>();
    each_flag(args, |name, _, value| {
        match name {
            "--data" => out.data = Some(PathBuf::from(value()?)),
            "--to" => out.to = Some(PathBuf::from(value()?)),
            "--project" => out.project = Some(value()?),
            "--kinds" => out.filter.kinds = list(value()?),
            "--namespaces" => out.filter.namespaces = list(value()?),
            "--log" => out.log = Some(log_filter(&value()?)?),
            other => return Err(format!("unknown argument of export: {other}")),
        }
        Ok(())
    })?;
    Ok(out)
}

fn serve_args(
    args: impl Iterator<Item = String>,
    log: &mut Option<Targets>,
) -> Result<Command, String> {
    let mut options = Options::default();
    let (mut import, mut project) = (None::<PathBuf>, None);
    each_flag(args, |name, inlined, value| {
        match name {
            "--host" => options.host = value()?,
            "--port" => {
                let text = value()?;
                options.port = text
                    .parse()
                    .map_err(|_| format!("--port {text}: not a port number"))?;
            }
            "--data" => options.data = Some(PathBuf::from(value()?)),
            "--require-indexes" => options.require_indexes = Some(PathBuf::from(value()?)),
            "--no-build-indexes" if !inlined => options.build_indexes = false,
            "--cache-mib" => options.cache_bytes = Some(mib(name, value()?)?),
            "--keep-versions" => {
                let text = value()?;
                let seconds: u64 = text
                    .parse()
                    .map_err(|_| format!("--keep-versions {text}: not a number of seconds"))?;
                options.keep_versions = Some(std::time::Duration::from_secs(seconds));
            }
            "--versions-mib" => options.versions_bytes = mib(name, value()?)?,
            "--import" => import = Some(PathBuf::from(value()?)),
            "--project" => project = Some(value()?),
            "--log" => *log = Some(log_filter(&value()?)?),
            other => return Err(format!("unknown argument {other}")),
        }
        Ok(())
    })?;
    if project.is_some() && import.is_none() {
        return Err("--project is the project of --import, which is missing".to_owned());
    }
    Ok(Command::Serve(
        options,
        import.map(|path| Import { path, project }),
    ))
}

/// The bytes of option `name`'s `text`, a number of MiB.
fn mib(name: &str, text: String) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .and_then(|mib| mib.checked_mul(1 << 20))
        .ok_or_else(|| format!("{name} {text}: not a number of MiB"))
}

/// A line on standard output; a closed output (a parent that stopped reading) does not stop
/// the server.
fn say(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let command = match command() {
        Ok((command, log)) => {
            install_log(log);
            command
        }
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (options, import) = match command {
        Command::Serve(options, import) => (options, import),
        Command::Export(args) => return export(args).await,
    };
    let server = match Server::start(options).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("datastore-entity-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    say(&format!(
        "[datastore-entity] API endpoint: http://{host}\n[datastore-entity] If you are using a \
         library that supports the DATASTORE_EMULATOR_HOST environment variable, run:\n\n   \
         export DATASTORE_EMULATOR_HOST={host}\n\n[datastore-entity] Dev App Server is now \
         running.",
        host = server.emulator_host()
    ));
    if let Some(import) = import
        && let Err(error) = import_export(&server, import).await
    {
        eprintln!("datastore-entity-server: import failed: {error}");
        server.stop().await;
        return ExitCode::FAILURE;
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = server.stopping() => {}
    }
    server.stop().await;
    say("[datastore-entity] stopped");
    ExitCode::SUCCESS
}

/// Imports `import` into the running `server`, printing the progress.
async fn import_export(server: &Server, import: Import) -> Result<(), ExportError> {
    let project = match import.project {
        Some(project) => project,
        None => export::project_of_export(&import.path)?.ok_or_else(|| ExportError::Invalid {
            reason: format!(
                "{} holds no entity to take the project from: give --project",
                import.path.display()
            ),
        })?,
    };
    say(&format!(
        "[datastore-entity] importing {} into project {project}",
        import.path.display()
    ));
    let started = Instant::now();
    let mut last = Instant::now();
    let done = server
        .import(&project, &import.path, &Filter::default(), &mut |p| {
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                say(&progress_line("imported", p, started));
            }
        })
        .await?;
    say(&progress_line("imported", done, started));
    Ok(())
}

/// `export`: the entities of a data file written as a managed export.
async fn export(args: ExportArgs) -> ExitCode {
    let (Some(data), Some(to), Some(project)) = (args.data, args.to, args.project) else {
        eprintln!("export needs --data FILE, --to DIR and --project PROJECT\n\n{USAGE}");
        return ExitCode::from(2);
    };
    if !data.is_file() {
        eprintln!(
            "datastore-entity-server: {}: no such data file",
            data.display()
        );
        return ExitCode::FAILURE;
    }
    // The server's page cache, not redb's default (1 GiB): an export reads each page once.
    let engine = match Embedded::open_with_cache(&data, Some(DEFAULT_CACHE_BYTES)) {
        Ok(engine) => engine,
        Err(error) => {
            eprintln!("datastore-entity-server: {}: {error}", data.display());
            return ExitCode::FAILURE;
        }
    };
    let service = Service::new(Arc::new(engine));
    let started = Instant::now();
    let mut last = Instant::now();
    let to = std::path::absolute(&to).unwrap_or(to);
    let exported = export::export(&service, &project, &to, &args.filter, &mut |p| {
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            say(&progress_line("exported", p, started));
        }
    })
    .await;
    match exported {
        Ok(exported) => {
            say(&progress_line("exported", exported.progress, started));
            say(&format!("{}", exported.overall.display()));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("datastore-entity-server: export failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn progress_line(what: &str, progress: Progress, started: Instant) -> String {
    format!(
        "[datastore-entity] {what} {} entities, {:.1} MiB in {:.1} s",
        progress.entities,
        progress.bytes as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    )
}
