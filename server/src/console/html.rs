//! The console's HTML: every text escaped where it is written, one page layout, and the
//! stylesheet embedded in the binary.

use std::fmt::Write as _;

/// The console's stylesheet, served at `/console/assets/console.css`.
pub(super) const STYLESHEET: &str = include_str!("console.css");

/// `text` as HTML text or an attribute's value: a property holding `<script>` is shown as
/// those characters.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one component of a URL's query (or path): percent-encoded.
pub(super) fn component(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A query string from its pairs, the empty values left out.
pub(super) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if out.is_empty() { '?' } else { '&' });
        let _ = write!(out, "{}={}", component(name), component(value));
    }
    out
}

/// A link: `href` and its text, both escaped.
pub(super) fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(href), escape(text))
}

/// A whole page: its title, the trail of links above it (href, text), and its body (HTML,
/// escaped by whoever made it).
pub(super) fn page(title: &str, trail: &[(String, String)], body: &str) -> String {
    let mut crumbs = String::from("<a href=\"/console\">Console</a>");
    for (href, text) in trail {
        let _ = write!(crumbs, " / {}", link(href, text));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · datastore-entity console</title>\
         <link rel=\"stylesheet\" href=\"/console/assets/console.css\"></head>\
         <body><header><nav>{crumbs}</nav></header><main><h1>{title}</h1>\n{body}\n</main></body></html>\n",
        title = escape(title),
    )
}

/// A table: its header cells (text) and rows (cells of HTML).
pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for header in headers {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// A message box: an error (with `role="alert"`) or a notice.
pub(super) fn notice(error: bool, text: &str) -> String {
    match error {
        true => format!("<p class=\"error\" role=\"alert\">{}</p>", escape(text)),
        false => format!("<p class=\"notice\">{}</p>", escape(text)),
    }
}

/// The GQL form.
pub(super) fn query_form(
    project: &str,
    gql: &str,
    database: &str,
    namespace: &str,
    bindings: &str,
) -> String {
    format!(
        "<form method=\"get\" action=\"/console/{}/query\" class=\"query\">\
         <p><label>GQL<br><textarea name=\"gql\" rows=\"3\" placeholder=\"SELECT * FROM Task WHERE done = FALSE ORDER BY created DESC\">{}</textarea></label></p>\
         <p><label>Bindings, one per line (<code>name = value</code>, or <code>1 = value</code> for @1)<br>\
         <textarea name=\"bindings\" rows=\"2\">{}</textarea></label></p>\
         <p><label>Database <input type=\"text\" name=\"database\" value=\"{}\"></label> \
         <label>Namespace <input type=\"text\" name=\"namespace\" value=\"{}\"></label></p>\
         <p><button type=\"submit\">Run</button></p></form>",
        escape(&component(project)),
        escape(gql),
        escape(bindings),
        escape(database),
        escape(namespace),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_text_wherever_it_is_written() {
        let evil = "<script>alert('x')</script>\"&";
        let escaped = escape(evil);
        assert_eq!(
            escaped,
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot;&amp;"
        );
        let page = page(evil, &[("/console/p?a=<b>".into(), evil.into())], "");
        assert!(!page.contains("<script>"), "{page}");
        assert!(link("/x\"><script>", "t").starts_with("<a href=\"/x&quot;&gt;&lt;script&gt;\">"));
    }

    #[test]
    fn query_strings_are_encoded_and_skip_empty_values() {
        assert_eq!(
            query(&[("gql", "SELECT * FROM `A&B`"), ("namespace", "")]),
            "?gql=SELECT+*+FROM+%60A%26B%60"
        );
        assert_eq!(query(&[]), "");
    }
}
