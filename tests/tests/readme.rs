//! The README's code, compiled: every ```rust block of `README.md` appears below verbatim
//! (indentation aside), inside the context it needs, so an example that no longer compiles
//! fails the build, and `every_readme_block_is_compiled_here` fails when a block of the README
//! is not (or no longer) in this file. The blocks need no other service: they run too.
//!
//! Also checked here: the README stays short (`the_readme_is_short_and_install_comes_early`),
//! and the README and the crate's front page (`runtime/src/lib.rs`) link every chapter of the
//! guide (`runtime/src/guide.rs`).

/// README: "A complete program".
#[rustfmt::skip]
mod complete_program {
    use datastore_entity::prelude::*;

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Account {
        #[key]
        pub name: KeyName,               // a validated key name: no `/`, not empty, ...
        pub email: String,
        #[exclude_from_index]            // never queried: no index entries (R-I1)
        pub bio: String,
        pub balance: i64,
    }

    #[derive(Entity, Debug, Clone, PartialEq)]
    pub struct Post {
        #[parent]
        pub account: Key<Account>,       // posts live under their account (R-E1)
        #[key]
        pub id: Option<KeyId>,           // None: a scattered id is allocated on put (R-K1)
        pub title: String,
        pub likes: i64,
    }

    #[tokio::main]
    async fn main() -> Result<(), Error> {
        let db = Db::in_memory();        // the embedded engine; Db::cloud("my-project") for Google Cloud
        let ann = Account {
            name: KeyName::new("ann")?,
            email: "ann@example.com".into(),
            bio: String::new(),
            balance: 50,
        };
        let ann_key = db.put(&ann).await?;
        let posts = [("Hello", 3), ("Second post", 10)].map(|(title, likes)| Post {
            account: ann_key.clone(),
            id: None,
            title: title.into(),
            likes,
        });
        db.put_many(&posts).await?;      // one commit (R-A1)

        let popular = db
            .query::<Post>()
            .filter(Post::LIKES.ge(5))   // typed: `Account::BIO.eq(..)` would not compile
            .fetch()
            .await?;
        assert_eq!(popular.items[0].title, "Second post");

        db.transaction(async |tx| {      // rolled back and retried on contention (R-A2)
            let mut ann = tx.get(&ann_key).await?.expect("stored above");
            ann.balance -= 10;
            tx.put(&ann).await?;
            Ok::<_, Error>(())
        })
        .await?;
        assert_eq!(db.get(&ann_key).await?.map(|a| a.balance), Some(40));
        Ok(())
    }

    #[test]
    fn the_complete_program_runs() {
        main().unwrap();
    }
}

#[test]
fn every_readme_block_is_compiled_here() {
    let readme = include_str!("../../README.md");
    let here: Vec<&str> = include_str!("readme.rs").lines().map(str::trim).collect();
    let mut blocks = 0;
    for block in readme.split("```rust\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        let lines: Vec<&str> = block.lines().map(str::trim).collect();
        blocks += 1;
        assert!(
            here.windows(lines.len()).any(|w| w == lines.as_slice()),
            "README block {blocks} is not compiled by tests/tests/readme.rs; copy it here, in \
             the context it needs:\n{block}"
        );
    }
    assert_eq!(
        blocks, 1,
        "the README's rust blocks changed: compile each new one here"
    );
}

/// Issue #53: a newcomer reads the whole README, and finds how to install the crate before
/// scrolling far.
#[test]
fn the_readme_is_short_and_install_comes_early() {
    let readme = include_str!("../../README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines, more than 250: move the detail to the guide \
         (runtime/src/guide/)"
    );
    let install = readme
        .lines()
        .position(|line| line == "## Install")
        .expect("README.md has a section `## Install`");
    assert!(
        install < 60,
        "README.md's `## Install` is on line {}, not within the first 60",
        install + 1
    );
}

/// Every chapter of the guide (a `pub mod` of `runtime/src/guide.rs`) is a Markdown file, linked
/// from the README's documentation table and from the crate's front page.
#[test]
fn the_readme_and_the_front_page_link_every_chapter_of_the_guide() {
    let guide = include_str!("../../runtime/src/guide.rs");
    let readme = include_str!("../../README.md");
    let lib = include_str!("../../runtime/src/lib.rs");
    let front_page: String = lib
        .lines()
        .take_while(|line| line.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let chapters: Vec<&str> = guide
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(" {}"))
        .collect();
    assert!(chapters.len() >= 9, "the guide's chapters: {chapters:?}");
    // (Spelled apart, so that the check of cited files does not read these as file names.)
    const MD: &str = ".md";
    for chapter in chapters {
        assert!(
            guide.contains(&format!("include_str!(\"guide/{chapter}{MD}\")")),
            "guide.rs: chapter `{chapter}` is not guide/{chapter}{MD}"
        );
        assert!(
            readme.contains(&format!("(runtime/src/guide/{chapter}{MD})")),
            "README.md does not link runtime/src/guide/{chapter}{MD}"
        );
        assert!(
            front_page.contains(&format!("(guide::{chapter})")),
            "the front page of runtime/src/lib.rs does not link guide::{chapter}"
        );
    }
}
