//! The console's pages over HTTP, as a browser reaches them: each page, an edit saved and
//! read back through the API (the rest of the entity unchanged), a delete, a GQL query with
//! bindings and a malformed one, markup shown as text, and the writes and reads another
//! origin or another host name would make, refused.
#![allow(missing_docs)]

use datastore_entity::prelude::*;
use datastore_entity_server::{Options, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Entity, Debug, Clone, PartialEq)]
struct Task {
    #[key]
    name: KeyName,
    title: String,
    priority: i64,
    #[exclude_from_index]
    notes: String,
    tags: Vec<String>,
}

async fn server() -> Server {
    Server::start(Options {
        port: 0,
        ..Options::default()
    })
    .await
    .expect("the server starts")
}

async fn db(server: &Server) -> Db {
    Db::cloud_builder("p")
        .endpoint(format!("http://{}", server.emulator_host()))
        .build()
        .await
        .expect("a handle on the server")
}

/// One HTTP/1.1 exchange: the status line, the headers and the body.
async fn send(server: &Server, request: String) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, head.to_owned(), body.to_owned())
}

async fn get(server: &Server, path: &str) -> (String, String, String) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.emulator_host()
    );
    send(server, request).await
}

async fn post(
    server: &Server,
    path: &str,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> (String, String, String) {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\n{origin}Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.emulator_host(),
        body.len()
    );
    send(server, request).await
}

/// The value of the first `name="…" value="…"` in `page`.
fn field<'p>(page: &'p str, name: &str) -> &'p str {
    let at = page
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("a field {name} in {page}"));
    let rest = &page[at + name.len() + 15..];
    &rest[..rest.find('"').unwrap()]
}

/// Unescapes what the pages escape.
fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Task `t1` as stored, if it is.
async fn stored(db: &Db) -> Option<Task> {
    db.get(&Task::key(KeyName::new("t1").unwrap()))
        .await
        .unwrap()
}

fn task(name: &str, title: &str) -> Task {
    Task {
        name: KeyName::new(name).unwrap(),
        title: title.to_owned(),
        priority: 2,
        notes: "keep me".to_owned(),
        tags: vec!["a".to_owned(), "b".to_owned()],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_edits_and_deletes_entities() {
    let server = server().await;
    let db = db(&server).await;
    db.put(&task("t1", "<script>alert(1)</script>"))
        .await
        .unwrap();
    db.put(&task("t2", "second")).await.unwrap();

    let (status, head, page) = get(&server, "/console").await;
    assert!(status.contains("200"), "{status}");
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    assert!(page.contains("href=\"/console/p\""), "{page}");

    // A project whose name starts like the console's path is still that project.
    let other = Db::cloud_builder("console-app")
        .endpoint(format!("http://{}", server.emulator_host()))
        .build()
        .await
        .unwrap();
    other.put(&task("x", "x")).await.unwrap();
    let (_, _, page) = get(&server, "/console/console-app").await;
    assert!(
        page.contains("href=\"/console/console-app/kinds/Task\""),
        "{page}"
    );

    let (_, _, page) = get(&server, "/console/p").await;
    assert!(page.contains("href=\"/console/p/kinds/Task\""), "{page}");
    assert!(page.contains(">2</td>"), "the kind's count: {page}");

    let (_, _, page) = get(&server, "/console/p/kinds/Task").await;
    // Markup in a value is text.
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    let at = page
        .find("/console/p/entity?key=")
        .expect("a link to an entity");
    let href = unescape(&page[at..at + page[at..].find('"').unwrap()]);

    let (status, _, page) = get(&server, &href).await;
    assert!(status.contains("200"), "{status}: {page}");
    assert!(page.contains("Task:&#39;t1&#39;"), "{page}");
    let token = field(&page, "token").to_owned();
    let key = field(&page, "key").to_owned();

    // An edit of one property: the rest (an excluded string, an array) stays as it was.
    let entity_path = "/console/p/entity";
    let edit = [
        ("token", token.as_str()),
        ("key", key.as_str()),
        ("t:priority", "integer"),
        ("v:priority", "7"),
        ("i:priority", "on"),
        ("t:title", "string"),
        ("v:title", "<script>alert(1)</script>"),
        ("i:title", "on"),
    ];
    let (status, head, _) = post(&server, entity_path, &edit, None).await;
    assert!(status.contains("303"), "{status}");
    assert!(head.contains("saved=1"), "{head}");
    let read = stored(&db).await.expect("t1 is stored");
    assert_eq!(read.priority, 7);
    assert_eq!(read.notes, "keep me");
    assert_eq!(read.tags, vec!["a", "b"]);
    assert_eq!(read.title, "<script>alert(1)</script>");

    // A value of the wrong type is refused, nothing written.
    let wrong = [
        ("token", token.as_str()),
        ("key", key.as_str()),
        ("t:priority", "integer"),
        ("v:priority", "seven"),
        ("i:priority", "on"),
    ];
    let (status, _, page) = post(&server, entity_path, &wrong, None).await;
    assert!(status.contains("400"), "{status}");
    assert!(page.contains("not a 64-bit integer"), "{page}");
    let read = stored(&db).await.expect("t1 is stored");
    assert_eq!(read.priority, 7);

    // Writes from another origin, or without the token, are refused; nothing is written.
    let (status, _, _) = post(&server, entity_path, &edit, Some("http://evil.example")).await;
    assert!(status.contains("403"), "{status}");
    // An opaque origin (a sandboxed frame, a `data:` page) is another origin too.
    let (status, _, _) = post(&server, entity_path, &edit, Some("null")).await;
    assert!(status.contains("403"), "{status}");
    let no_token = &edit[1..];
    let (status, _, _) = post(&server, entity_path, no_token, None).await;
    assert!(status.contains("403"), "{status}");
    let delete = [("token", token.as_str()), ("key", key.as_str())];
    let (status, _, _) = post(
        &server,
        "/console/p/entity/delete",
        &delete,
        Some("http://evil.example"),
    )
    .await;
    assert!(status.contains("403"), "{status}");
    // A page asked for under another host name (DNS rebinding) is refused.
    let request =
        "GET /console/p/kinds/Task HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n";
    let (status, _, page) = send(&server, request.to_owned()).await;
    assert!(status.contains("403"), "{status}");
    assert!(!page.contains("t2"), "{page}");
    assert!(stored(&db).await.is_some());

    // A delete from the console's own page.
    let (status, _, _) = post(
        &server,
        "/console/p/entity/delete",
        &delete,
        Some(&format!("http://{}", server.emulator_host())),
    )
    .await;
    assert!(status.contains("303"), "{status}");
    assert!(stored(&db).await.is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_runs_gql_with_bindings_and_shows_a_mistakes_position() {
    let server = server().await;
    let db = db(&server).await;
    for i in 0..30 {
        let mut t = task(&format!("t{i:02}"), &format!("task {i}"));
        t.priority = i % 3;
        db.put(&t).await.unwrap();
    }
    let query = |gql: &str, bindings: &str| {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([("gql", gql), ("bindings", bindings)])
            .finish();
        format!("/console/p/query?{q}")
    };
    let (status, _, page) = get(
        &server,
        &query(
            "SELECT * FROM Task WHERE priority = @p ORDER BY __key__",
            "p = 1",
        ),
    )
    .await;
    assert!(status.contains("200"), "{status}: {page}");
    // Priority 1: t01, t04, … t28 — ten, on one page.
    assert_eq!(page.matches("/console/p/entity?key=").count(), 10, "{page}");
    assert!(!page.contains("Next"), "{page}");

    // Thirty results: a page of 20, then the rest from its cursor.
    let (_, _, page) = get(&server, &query("SELECT * FROM Task", "")).await;
    assert_eq!(page.matches("/console/p/entity?key=").count(), 20, "{page}");
    let at = page.find("Next").expect("a next page");
    let start = page[..at].rfind("href=\"").unwrap() + 6;
    let next = unescape(&page[start..start + page[start..].find('"').unwrap()]);
    let (_, _, page) = get(&server, &next).await;
    assert_eq!(page.matches("/console/p/entity?key=").count(), 10, "{page}");
    assert!(page.contains("Previous"), "{page}");

    let (_, _, page) = get(
        &server,
        &query("SELECT COUNT(*) AS n FROM Task WHERE priority = 2", ""),
    )
    .await;
    assert!(
        page.contains("<code>n</code>") && page.contains(">10 <span"),
        "{page}"
    );

    let (status, _, page) = get(&server, &query("SELECT * FRM Task", "")).await;
    assert!(status.contains("400"), "{status}");
    assert!(page.contains("1:10"), "the mistake's position: {page}");
    server.stop().await;
}

/// Polls the transfer page of `project` until no job runs; the page.
async fn transfer_page(server: &Server, project: &str) -> String {
    for _ in 0..200 {
        let (_, _, page) = get(server, &format!("/console/{project}/transfer")).await;
        if !page.contains("http-equiv=\"refresh\"") {
            return page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the job did not end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_exports_and_imports_with_progress() {
    let server = server().await;
    let db = db(&server).await;
    for i in 0..25 {
        db.put(&task(&format!("t{i:02}"), &format!("task {i}")))
            .await
            .unwrap();
    }
    let (_, _, page) = get(&server, "/console/p/transfer").await;
    let token = field(&page, "token").to_owned();

    // A relative path is refused with the reason; nothing starts.
    let (status, head, _) = post(
        &server,
        "/console/p/transfer/export",
        &[("token", &token), ("path", "relative/dir")],
        None,
    )
    .await;
    assert!(status.contains("303"), "{status}");
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .expect("where to go");
    let (_, _, page) = get(&server, location).await;
    assert!(page.contains("must be absolute"), "{page}");
    assert!(page.contains("None yet"), "{page}");

    let dir = std::env::temp_dir().join(format!("console-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.to_string_lossy().into_owned();
    let (status, _, _) = post(
        &server,
        "/console/p/transfer/export",
        &[("token", &token), ("path", &path), ("kinds", "Task")],
        None,
    )
    .await;
    assert!(status.contains("303"), "{status}");
    let page = transfer_page(&server, "p").await;
    assert!(page.contains("done: 25 entities"), "{page}");
    let overall = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.path())
        .find(|p| p.to_string_lossy().ends_with(".overall_export_metadata"))
        .expect("the export's overall metadata");

    // Imported into another project, from the console of that project.
    let (status, _, _) = post(
        &server,
        "/console/q/transfer/import",
        &[("token", &token), ("path", &overall.to_string_lossy())],
        None,
    )
    .await;
    assert!(status.contains("303"), "{status}");
    let page = transfer_page(&server, "q").await;
    assert!(page.contains("done: 25 entities"), "{page}");
    let q = Db::cloud_builder("q")
        .endpoint(format!("http://{}", server.emulator_host()))
        .build()
        .await
        .unwrap();
    assert_eq!(q.query::<Task>().count().await.unwrap(), 25);
    std::fs::remove_dir_all(&dir).ok();
    server.stop().await;
}
