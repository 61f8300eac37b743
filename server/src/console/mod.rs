//! The console: pages that show and change the server's data in a browser, served on the
//! server's own port under `/console` — no other process, nothing fetched from the internet,
//! no script (a stylesheet embedded in the binary).
//!
//! Every read and write goes through the same [`Service`](crate::serve::Service) the gRPC and
//! REST calls reach. Since any web page the user's browser opens can reach a port on
//! loopback, the console checks that:
//! - the request's `Host` names this server by an IP address or `localhost` with its port
//!   (a page on another name that resolves here — DNS rebinding — gets 403, so it cannot
//!   read the pages);
//! - a write (`POST`) comes from the console's own pages: its `Origin`, when sent, is this
//!   server, and its form carries the token this server made at start and put in its pages,
//!   which another origin cannot read.
//!
//! Pages set `Content-Security-Policy` (no script, no framing) and every value is escaped
//! where it is written.

mod entity;
mod html;
mod jobs;
mod pages;
mod query;
mod transfer;
mod values;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tonic::body::Body;

use crate::body::Room;
use crate::serve::Service;
use datastore_entity::backend::embedded::Embedded;
use pages::Form;

/// What the console keeps: the port it is served on and the token its forms carry.
pub(crate) struct Console {
    port: u16,
    token: String,
    /// The imports and exports started from its pages.
    jobs: jobs::Jobs,
}

impl Console {
    /// The console of a server listening on `port`, with a new token.
    pub(crate) fn new(port: u16) -> Console {
        let mut bytes = [0u8; 16];
        // Without the system's randomness no token is safe: writes are then refused.
        let token = match getrandom::fill(&mut bytes) {
            Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => String::new(),
        };
        Console {
            port,
            token,
            jobs: jobs::Jobs::default(),
        }
    }

    /// Whether `host` (a `Host` header) names this server: an IP address or `localhost`,
    /// with its port.
    fn is_own_host(&self, host: &str) -> bool {
        let Some((name, port)) = host.rsplit_once(':') else {
            return false;
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        port.parse() == Ok(self.port)
            && (name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok())
    }

    /// Why `request` may not reach the console, if it may not.
    fn refusal(&self, request: &Request<Incoming>) -> Option<&'static str> {
        let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
        let host = header(header::HOST).unwrap_or_default();
        if !self.is_own_host(host) {
            return Some(
                "The console answers only requests addressed to this server by its IP address \
                 or localhost, with its port.",
            );
        }
        if request.method() == Method::POST
            && let Some(origin) = header(header::ORIGIN)
            && origin != format!("http://{host}")
        {
            return Some("A page from another origin cannot change this server's data.");
        }
        None
    }
}

/// Whether `path` is the console's.
pub(crate) fn is_console(path: &str) -> bool {
    path == "/console" || path.starts_with("/console/")
}

/// Answers one request to the console.
pub(crate) async fn handle(
    console: &Console,
    service: Service,
    engine: &Embedded,
    room: &Room,
    request: Request<Incoming>,
) -> Response<Body> {
    if let Some(refusal) = console.refusal(&request) {
        return respond(StatusCode::FORBIDDEN, refusal_page(refusal));
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = parse_form(request.uri().query().unwrap_or_default().as_bytes());
    let form = match method {
        Method::POST => {
            let declared = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse().ok());
            match room.read_json(request.into_body(), declared).await {
                Ok(read) => parse_form(&read.bytes),
                Err(status) => {
                    return respond(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        refusal_page(status.message()),
                    );
                }
            }
        }
        _ => Form::new(),
    };
    if method == Method::POST
        && (console.token.is_empty() || form.get("token") != Some(&console.token))
    {
        return respond(
            StatusCode::FORBIDDEN,
            refusal_page("This form does not carry the console's token: reload the page."),
        );
    }
    let segments: Vec<String> = path
        .strip_prefix("/console")
        .unwrap_or_default()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let context = pages::Context {
        service: &service,
        engine,
        jobs: &console.jobs,
        token: &console.token,
        query: &query,
        form: &form,
    };
    let answer = match (&method, segments.as_slice()) {
        (&Method::GET, ["assets", "console.css"]) => {
            let mut response = Response::new(Body::new(Full::new(Bytes::from_static(
                html::STYLESHEET.as_bytes(),
            ))));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/css; charset=utf-8"),
            );
            return response;
        }
        (&Method::GET, []) => pages::projects(&context).await,
        (&Method::GET, [project]) => pages::project(&context, project).await,
        (&Method::GET, [project, "kinds", kind]) => pages::kind(&context, project, kind).await,
        (&Method::GET, [project, "kinds", kind, "new"]) => {
            entity::new_entity(&context, project, kind).await
        }
        (&Method::GET, [project, "entity"]) => entity::entity(&context, project).await,
        (&Method::POST, [project, "entity"]) => entity::save(&context, project).await,
        (&Method::GET, [project, "entity", "delete"]) => {
            entity::confirm_delete(&context, project).await
        }
        (&Method::POST, [project, "entity", "delete"]) => entity::delete(&context, project).await,
        (&Method::GET, [project, "query"]) => query::query(&context, project).await,
        (&Method::GET, [project, "transfer"]) => transfer::transfer(&context, project).await,
        (&Method::POST, [project, "transfer", "export"]) => {
            transfer::start(&context, project, false).await
        }
        (&Method::POST, [project, "transfer", "import"]) => {
            transfer::start(&context, project, true).await
        }
        _ => pages::Answer::Page(
            StatusCode::NOT_FOUND,
            html::page(
                "Not found",
                &[],
                &html::notice(true, &format!("The console has no page at {path}.")),
            ),
        ),
    };
    match answer {
        pages::Answer::Page(status, page) => respond(status, page),
        pages::Answer::Redirect(to) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::SEE_OTHER;
            if let Ok(to) = HeaderValue::from_str(&to) {
                response.headers_mut().insert(header::LOCATION, to);
            }
            response
        }
    }
}

fn refusal_page(reason: &str) -> String {
    html::page("Refused", &[], &html::notice(true, reason))
}

/// A form or query string's fields.
fn parse_form(bytes: &[u8]) -> Form {
    form_urlencoded::parse(bytes).into_owned().collect()
}

/// A page with the console's headers: HTML, no script, no framing, not cached.
fn respond(status: StatusCode, page: String) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(Bytes::from(page))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends the console's own
    // forms with `Origin: null`, which the write check refuses.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_servers_own_addresses_are_its_host() {
        let console = Console::new(8081);
        for host in [
            "127.0.0.1:8081",
            "localhost:8081",
            "[::1]:8081",
            "LOCALHOST:8081",
            "10.0.0.2:8081",
        ] {
            assert!(console.is_own_host(host), "{host}");
        }
        for host in [
            "evil.example:8081",
            "127.0.0.1:8082",
            "127.0.0.1",
            "",
            "localhost.evil.example:8081",
        ] {
            assert!(!console.is_own_host(host), "{host}");
        }
        assert_eq!(console.token.len(), 32);
    }
}
