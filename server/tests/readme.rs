//! `server/README.md` checked: its flag table says what `--help` says, its Rust block compiles
//! and runs (it appears below verbatim, indentation aside), and a reader reaches a working
//! client command within its first 40 lines.

use std::process::Command;

const README: &str = include_str!("../README.md");

/// `--help`'s flags, in order: (`--name ARG`, the description on one line).
fn help_flags(help: &str) -> Vec<(String, String)> {
    let mut flags: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || !line.starts_with(' ') {
            continue;
        }
        if trimmed.starts_with("--") {
            let mut words = trimmed.split_whitespace();
            // A flag and its argument (a flag such as `--build-indexes` takes none).
            let name = format!(
                "{} {}",
                words.next().unwrap_or_default(),
                words.next().unwrap_or_default()
            )
            .trim_end()
            .to_owned();
            flags.push((name, words.collect::<Vec<_>>().join(" ")));
        } else if let Some((_, text)) = flags.last_mut() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&trimmed.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    flags
}

/// The endpoints (`GET /`, `POST /reset`) named in `text`.
fn endpoints(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for method in ["GET", "POST"] {
        for (at, _) in text.match_indices(&format!("{method} /")) {
            let path: String = text[at + method.len() + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/_{}:".contains(*c))
                .collect();
            found.push(format!("{method} {path}"));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The rows of the README's table under `## Flags and endpoints`: (first cell without its
/// backticks, second cell).
fn table_rows() -> Vec<(String, String)> {
    let section = README
        .split("\n## Flags and endpoints\n")
        .nth(1)
        .expect("server/README.md has a section `## Flags and endpoints`");
    section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].trim_matches('`').to_owned(), cells[1].to_owned())
        })
        .collect()
}

#[test]
fn the_flag_table_says_what_help_says() {
    let output = Command::new(env!("CARGO_BIN_EXE_datastore-entity-server"))
        .arg("--help")
        .output()
        .expect("the server runs");
    assert!(output.status.success(), "--help fails: {output:?}");
    let help = String::from_utf8(output.stdout).expect("--help prints UTF-8");
    let expected = help_flags(&help);
    assert!(
        expected.len() >= 7,
        "the flags read from --help: {expected:?}"
    );
    let rows = table_rows();
    let table: Vec<(String, String)> = rows
        .iter()
        .filter(|(name, _)| name.starts_with("--"))
        .cloned()
        .collect();
    assert_eq!(
        table, expected,
        "server/README.md's flag table and `datastore-entity-server --help` disagree: copy \
         each flag and its description from --help, in its order"
    );
    let listed: Vec<String> = rows
        .iter()
        .map(|(name, _)| name.clone())
        .filter(|name| !name.starts_with("--"))
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        endpoints(&help),
        "server/README.md's endpoints and those --help names disagree"
    );
}

#[test]
fn a_client_command_comes_within_the_first_40_lines() {
    let head: Vec<&str> = README.lines().take(40).collect();
    let export = head
        .iter()
        .position(|line| line.starts_with("export DATASTORE_EMULATOR_HOST="))
        .expect("an `export DATASTORE_EMULATOR_HOST=` within the first 40 lines");
    assert!(
        head[export..]
            .iter()
            .any(|line| line.starts_with("python3 ") || line.starts_with("node ")),
        "a client command after the export, within the first 40 lines"
    );
    assert!(
        head[export..].contains(&"```"),
        "the client's block ends within the first 40 lines"
    );
}

/// server/README.md: "From Rust tests, in-process".
#[rustfmt::skip]
mod in_process {
    use datastore_entity::prelude::*;
    use datastore_entity_server::{Options, Server};

    #[derive(Entity, Debug, Clone, PartialEq)]
    struct Task {
        #[key]
        name: KeyName,
        done: bool,
    }

    #[tokio::main]
    async fn main() -> Result<(), Error> {
        let server = Server::start(Options { port: 0, ..Options::default() }).await?; // in memory
        let db = Db::cloud_builder("my-project")
            .endpoint(format!("http://{}", server.emulator_host()))
            .build()
            .await?;
        let key = db.put(&Task { name: KeyName::new("first")?, done: false }).await?;
        assert_eq!(db.get(&key).await?.map(|t| t.done), Some(false));
        server.stop().await;
        Ok(())
    }

    #[test]
    fn the_in_process_example_runs() {
        main().unwrap();
    }
}

#[test]
fn every_rust_block_of_the_readme_is_compiled_here() {
    let here: Vec<&str> = include_str!("readme.rs").lines().map(str::trim).collect();
    let mut blocks = 0;
    for block in README.split("```rust\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        let lines: Vec<&str> = block.lines().map(str::trim).collect();
        blocks += 1;
        assert!(
            here.windows(lines.len()).any(|w| w == lines.as_slice()),
            "server/README.md's Rust block {blocks} is not compiled by server/tests/readme.rs; \
             copy it here:\n{block}"
        );
    }
    assert_eq!(
        blocks, 1,
        "server/README.md's Rust blocks changed: compile each one here"
    );
}
