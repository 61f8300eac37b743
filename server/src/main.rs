//! `datastore-entity-server`: Google's Datastore API on a port, answered by the embedded
//! engine, in memory or in a file. Any client of the service (or of its emulators) uses it
//! through `DATASTORE_EMULATOR_HOST`.

use std::path::PathBuf;
use std::process::ExitCode;

use datastore_entity_server::{Options, Server};

const USAGE: &str = "usage: datastore-entity-server [--host HOST] [--port PORT] [--data FILE]

  --host HOST   the address to listen on (default 127.0.0.1)
  --port PORT   the port (default 8081; 0 picks a free one)
  --data FILE   keep the data in FILE (created if missing; in memory, compressed,
                otherwise)
  --require-indexes FILE
                serve only the queries the composite indexes of this index.yaml serve
                (as the service does); every query otherwise, as the Firestore emulator
  --build-indexes
                without --require-indexes, build the composite index a query needs on
                its first use (each build holds the server while it reads every entity)
  --cache-mib MIB
                the page cache of the --data file, in MiB (default 64)
  --keep-versions SECONDS
                keep past versions this long, for reads at a read_time (default 3600;
                0 keeps none but those open transactions read)
  --versions-mib MIB
                the most memory past versions take, in MiB (default 64): past it the
                oldest go first, and a transaction whose snapshot needs more aborts

Serves the Datastore API over gRPC and, on the same port, its REST form:
POST /v1/projects/{project}:{method} (lookup, runQuery, commit, ...).
Stops on Ctrl-C or POST /shutdown; POST /reset drops all data; GET / answers Ok.";

fn options() -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        if name == "--help" || name == "-h" {
            return Err(String::new());
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--host" => options.host = value()?,
            "--port" => {
                let text = value()?;
                options.port = text
                    .parse()
                    .map_err(|_| format!("--port {text}: not a port number"))?;
            }
            "--data" => options.data = Some(PathBuf::from(value()?)),
            "--require-indexes" => options.require_indexes = Some(PathBuf::from(value()?)),
            "--build-indexes" if inline.is_none() => options.build_indexes = true,
            "--cache-mib" => options.cache_bytes = Some(mib(&name, value()?)?),
            "--keep-versions" => {
                let text = value()?;
                let seconds: u64 = text
                    .parse()
                    .map_err(|_| format!("--keep-versions {text}: not a number of seconds"))?;
                options.keep_versions = Some(std::time::Duration::from_secs(seconds));
            }
            "--versions-mib" => options.versions_bytes = mib(&name, value()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(options)
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

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
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
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = server.stopping() => {}
    }
    server.stop().await;
    say("[datastore-entity] stopped");
    ExitCode::SUCCESS
}
