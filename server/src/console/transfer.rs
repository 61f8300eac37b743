//! Managed exports from the console: an export of the project (or of some kinds and
//! namespaces) into a folder on the server's machine, and an import of one, each run in the
//! background through the same code as `--import` and the REST `:import`/`:export`, its
//! progress on a page that reloads itself until the job ends.

use std::fmt::Write as _;
use std::path::PathBuf;

use hyper::StatusCode;

use super::html::{self, escape, notice, page, table};
use super::jobs::State;
use super::pages::{Answer, Context, project_href};
use crate::export::{self, Filter};

fn transfer_href(project: &str) -> String {
    format!("/console/{}/transfer", html::component(project))
}

/// A comma-separated list, its items trimmed (`""` stands for the default namespace when
/// written as `""`).
fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s == "\"\"" {
                String::new()
            } else {
                s.to_owned()
            }
        })
        .collect()
}

/// `/console/{project}/transfer`: the forms, and the project's jobs with their progress.
pub(super) async fn transfer(cx: &Context<'_>, project: &str) -> Answer {
    let trail = [(project_href(project), project.to_owned())];
    let jobs = cx.jobs.of(project);
    let running = jobs.iter().any(|j| matches!(j.state(), State::Running(_)));
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            let state = match job.state() {
                State::Running(p) => {
                    format!("running: {} entities, {} bytes so far", p.entities, p.bytes)
                }
                State::Done(text) => format!("done: {text}"),
                State::Failed(text) => format!("failed: {text}"),
            };
            vec![job.id.to_string(), escape(&job.what), escape(&state)]
        })
        .collect();
    let action = |what: &str| format!("{}/{what}", transfer_href(project));
    let mut body = String::new();
    if let Some(message) = cx.query.get("error") {
        body.push_str(&notice(true, message));
    }
    let _ = write!(
        body,
        "<h2>Export</h2><form method=\"post\" action=\"{export}\">{token}\
         <p><label>Into the folder (a path on the server's machine; a new folder is made in it) \
         <input type=\"text\" name=\"path\" required></label></p>\
         <p><label>Kinds (comma-separated; empty: all) <input type=\"text\" name=\"kinds\"></label></p>\
         <p><label>Namespaces (comma-separated, \"\" for the default; empty: all) \
         <input type=\"text\" name=\"namespaces\"></label></p>\
         <p><button type=\"submit\">Export</button></p></form>\
         <h2>Import</h2><form method=\"post\" action=\"{import}\">{token}\
         <p><label>The export's <code>.overall_export_metadata</code>, or its folder \
         <input type=\"text\" name=\"path\" required></label></p>\
         <p><label>Kinds (comma-separated; empty: all) <input type=\"text\" name=\"kinds\"></label></p>\
         <p><label>Namespaces (comma-separated, \"\" for the default; empty: all) \
         <input type=\"text\" name=\"namespaces\"></label></p>\
         <p><button type=\"submit\">Import</button></p></form>\
         <h2>Jobs</h2>{jobs}",
        export = escape(&action("export")),
        import = escape(&action("import")),
        token = cx.hidden_token(),
        jobs = match rows.is_empty() {
            true => "<p class=\"muted\">None yet.</p>".to_owned(),
            false => table(&["#", "What", "Where it is"], &rows),
        },
    );
    let mut html = page("Import and export", &trail, &body);
    if running {
        // Reloaded each second while a job runs: no script.
        html = html.replacen(
            "<head>",
            "<head><meta http-equiv=\"refresh\" content=\"1\">",
            1,
        );
    }
    Answer::Page(StatusCode::OK, html)
}

/// `POST /console/{project}/transfer/{export,import}`: starts the job, back to the jobs.
pub(super) async fn start(cx: &Context<'_>, project: &str, import: bool) -> Answer {
    let path = PathBuf::from(cx.field("path").trim());
    if !path.is_absolute() {
        let back = format!(
            "{}{}",
            transfer_href(project),
            html::query(&[(
                "error",
                "The path must be absolute (it is on the server's machine)."
            )])
        );
        return Answer::Redirect(back);
    }
    let filter = Filter {
        kinds: list(cx.field("kinds")),
        namespaces: list(cx.field("namespaces")),
    };
    let what = match import {
        true => format!("Import of {} into {project}", path.display()),
        false => format!("Export of {project} into {}", path.display()),
    };
    let job = cx.jobs.start(project, what);
    let service = cx.service.clone();
    let project = project.to_owned();
    let back = transfer_href(&project);
    tokio::spawn(async move {
        let progress = &mut |p| job.set(State::Running(p));
        let state = match import {
            true => export::import(&service, &project, &path, &filter, progress)
                .await
                .map(|p| {
                    State::Done(format!(
                        "{} entities, {} bytes imported",
                        p.entities, p.bytes
                    ))
                }),
            false => export::export(&service, &project, &path, &filter, progress)
                .await
                .map(|e| {
                    State::Done(format!(
                        "{} entities, {} bytes written; the overall metadata is {}",
                        e.progress.entities,
                        e.progress.bytes,
                        e.overall.display()
                    ))
                }),
        };
        job.set(state.unwrap_or_else(|e| State::Failed(e.to_string())));
    });
    Answer::Redirect(back)
}
