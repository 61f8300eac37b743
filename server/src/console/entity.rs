//! An entity's page: its key and properties, each edited in a field of its type and saved
//! in one commit over the entity as stored (what the form does not change is kept as it is);
//! a new entity; a delete, asked first.

use std::fmt::Write as _;

use datastore_entity::backend::cloud::wire::Partitions;
use gcloud_sdk::google::datastore::v1 as pb;
use hyper::StatusCode;
use pb::key::path_element::IdType;
use pb::value::ValueType;
use tonic::Status;

use super::html::{self, escape, link, notice, page, query as query_string, table};
use super::pages::{
    Answer, Context, entity_href, failed, key_from_param, key_param, kind_href, ok, path_text,
    project_href, shown, trail_of,
};
use super::values::{self, TYPES};

/// Looks `key` up: its entity, if there is one.
async fn lookup(cx: &Context<'_>, key: &pb::Key) -> Result<Option<pb::Entity>, Status> {
    let partition = key.partition_id.clone().unwrap_or_default();
    let response = cx
        .service
        .lookup(pb::LookupRequest {
            project_id: partition.project_id.clone(),
            database_id: partition.database_id.clone(),
            keys: vec![key.clone()],
            ..pb::LookupRequest::default()
        })
        .await?;
    Ok(response.found.into_iter().next().and_then(|f| f.entity))
}

/// Whether `value` is indexed: not excluded (an array: none of its values).
fn indexed(value: &pb::Value) -> bool {
    match &value.value_type {
        Some(ValueType::ArrayValue(array)) => {
            !value.exclude_from_indexes && array.values.iter().all(|v| !v.exclude_from_indexes)
        }
        _ => !value.exclude_from_indexes,
    }
}

/// `value` indexed or not (an array through its values, as the service requires).
fn set_indexed(value: &mut pb::Value, on: bool) {
    match &mut value.value_type {
        Some(ValueType::ArrayValue(array)) => {
            value.exclude_from_indexes = false;
            for v in &mut array.values {
                v.exclude_from_indexes = !on;
            }
        }
        _ => value.exclude_from_indexes = !on,
    }
}

/// The input a value of `type_name` is edited in, named `name`.
fn input(name: &str, type_name: &str, text: &str) -> String {
    let name = escape(name);
    let text = escape(text);
    match type_name {
        "null" => format!(
            "<input type=\"hidden\" name=\"{name}\" value=\"\"><span class=\"muted\">null</span>"
        ),
        "boolean" => format!(
            "<select name=\"{name}\"><option{}>true</option><option{}>false</option></select>",
            if text == "true" { " selected" } else { "" },
            if text == "false" { " selected" } else { "" }
        ),
        "integer" => format!("<input type=\"number\" step=\"1\" name=\"{name}\" value=\"{text}\">"),
        "double" | "timestamp" => {
            format!("<input type=\"text\" name=\"{name}\" value=\"{text}\" class=\"mono\">")
        }
        _ => format!(
            "<textarea name=\"{name}\" rows=\"{}\">{text}</textarea>",
            text.lines().count().clamp(1, 12)
        ),
    }
}

fn type_select(name: &str) -> String {
    let mut out = format!("<select name=\"{}\">", escape(name));
    for t in TYPES {
        let _ = write!(
            out,
            "<option{}>{t}</option>",
            if t == "string" { " selected" } else { "" }
        );
    }
    out.push_str("</select>");
    out
}

/// The form that edits `entity` (or makes a new one of `kind`), above its key.
fn entity_form(
    cx: &Context<'_>,
    project: &str,
    key: Option<&pb::Key>,
    entity: &pb::Entity,
    kind: &str,
) -> String {
    let mut names: Vec<&String> = entity.properties.keys().collect();
    names.sort();
    let mut rows = Vec::new();
    for name in names {
        let value = &entity.properties[name];
        let type_name = values::type_of(value);
        rows.push(vec![
            format!("<code>{}</code>", escape(name)),
            format!(
                "<span class=\"type\">{type_name}</span><input type=\"hidden\" name=\"t:{}\" value=\"{type_name}\">",
                escape(name)
            ),
            format!(
                "<input type=\"checkbox\" name=\"i:{}\"{} aria-label=\"indexed\">",
                escape(name),
                if indexed(value) { " checked" } else { "" }
            ),
            input(&format!("v:{name}"), type_name, &values::text_of(value)),
            format!("<input type=\"checkbox\" name=\"d:{}\" aria-label=\"remove\">", escape(name)),
        ]);
    }
    rows.push(vec![
        "<input type=\"text\" name=\"new_name\" placeholder=\"new property\">".to_owned(),
        type_select("new_type"),
        "<input type=\"checkbox\" name=\"new_indexed\" checked aria-label=\"indexed\">".to_owned(),
        "<textarea name=\"new_value\" rows=\"1\"></textarea>".to_owned(),
        String::new(),
    ]);
    let mut out = format!(
        "<form method=\"post\" action=\"/console/{}/entity\" class=\"entity\">",
        escape(&html::component(project))
    );
    out.push_str(&cx.hidden_token());
    match key {
        Some(key) => {
            let _ = write!(
                out,
                "<input type=\"hidden\" name=\"key\" value=\"{}\">",
                escape(&key_param(key))
            );
        }
        None => {
            let _ = write!(
                out,
                "<input type=\"hidden\" name=\"kind\" value=\"{}\"><p><label>Key name or id \
                 <input type=\"text\" name=\"id_or_name\" placeholder=\"empty: an id is allocated\"></label></p>",
                escape(kind)
            );
        }
    }
    out.push_str(&table(
        &["Property", "Type", "Indexed", "Value", "Remove"],
        &rows,
    ));
    out.push_str("<p><button type=\"submit\">Save</button></p></form>");
    out
}

/// `/console/{project}/entity?key=…`: the entity's key, its properties, their editor.
pub(super) async fn entity(cx: &Context<'_>, project: &str) -> Answer {
    let trail = [(project_href(project), project.to_owned())];
    let Some(key) = key_from_param(cx.param("key")) else {
        return Answer::Page(
            StatusCode::BAD_REQUEST,
            page(
                "Entity",
                &trail,
                &notice(true, "This link does not name a key."),
            ),
        );
    };
    let message = match cx.param("saved") {
        "1" => notice(false, "Saved."),
        _ => String::new(),
    };
    show_entity(cx, &key, &message, StatusCode::OK).await
}

async fn show_entity(cx: &Context<'_>, key: &pb::Key, message: &str, status: StatusCode) -> Answer {
    let partition = key.partition_id.clone().unwrap_or_default();
    let kind = key.path.last().map_or("", |e| e.kind.as_str());
    let trail = trail_of(&partition, Some(kind));
    let title = path_text(key);
    let entity = match lookup(cx, key).await {
        Ok(Some(entity)) => entity,
        Ok(None) => {
            return Answer::Page(
                StatusCode::NOT_FOUND,
                page(&title, &trail, &notice(true, "No entity has this key.")),
            );
        }
        Err(status) => return failed(&status, &title, &trail),
    };
    let urlsafe = Partitions::new(&partition.project_id, &partition.database_id)
        .raw_key(key.clone())
        .map(|k| k.to_urlsafe(&partition.project_id))
        .unwrap_or_default();
    let mut body = String::from(message);
    body.push_str(&table(
        &["Path", "Database", "Namespace", "URL-safe key"],
        &[vec![
            format!("<code>{}</code>", escape(&title)),
            escape(shown(&partition.database_id)),
            escape(shown(&partition.namespace_id)),
            format!("<code>{}</code>", escape(&urlsafe)),
        ]],
    ));
    body.push_str(&entity_form(
        cx,
        &partition.project_id,
        Some(key),
        &entity,
        kind,
    ));
    let _ = write!(
        body,
        "<p>{}</p>",
        link(
            &format!(
                "/console/{}/entity/delete{}",
                html::component(&partition.project_id),
                query_string(&[("key", &key_param(key))])
            ),
            "Delete this entity…"
        )
    );
    Answer::Page(status, page(&title, &trail, &body))
}

/// `/console/{project}/kinds/{kind}/new`: the form of a new entity.
pub(super) async fn new_entity(cx: &Context<'_>, project: &str, kind: &str) -> Answer {
    let partition = cx.partition(project);
    let trail = trail_of(&partition, Some(kind));
    let mut body = format!(
        "<p class=\"muted\">Database {} · namespace {}</p>",
        escape(shown(&partition.database_id)),
        escape(shown(&partition.namespace_id))
    );
    let form = entity_form(cx, project, None, &pb::Entity::default(), kind);
    // The partition goes with the form.
    let fields = format!(
        "<input type=\"hidden\" name=\"database\" value=\"{}\">\
         <input type=\"hidden\" name=\"namespace\" value=\"{}\">",
        escape(&partition.database_id),
        escape(&partition.namespace_id)
    );
    body.push_str(&form.replacen("</form>", &format!("{fields}</form>"), 1));
    ok(&format!("New {kind}"), &trail, &body)
}

/// The properties the form writes over `current` (what it does not name is kept as it is,
/// exclusions and meanings included), or what is wrong with one.
fn edited(cx: &Context<'_>, mut current: pb::Entity) -> Result<pb::Entity, String> {
    let mut names: Vec<&str> = cx
        .form
        .keys()
        .filter_map(|k| k.strip_prefix("t:"))
        .collect();
    names.sort_unstable();
    for name in names {
        if !cx.field(&format!("d:{name}")).is_empty() {
            current.properties.remove(name);
            continue;
        }
        let type_name = cx.field(&format!("t:{name}"));
        let text = cx.field(&format!("v:{name}"));
        let on = !cx.field(&format!("i:{name}")).is_empty();
        let value = match current.properties.get(name) {
            // Unchanged text: the stored value stays, whatever the form cannot show.
            Some(old) if values::type_of(old) == type_name && values::text_of(old) == text => {
                let mut kept = old.clone();
                if indexed(old) != on {
                    set_indexed(&mut kept, on);
                }
                kept
            }
            old => {
                let mut value =
                    values::parse(type_name, text).map_err(|e| format!("{name}: {e}"))?;
                if let Some(old) = old.filter(|o| values::type_of(o) == type_name) {
                    value.meaning = old.meaning;
                }
                set_indexed(&mut value, on);
                value
            }
        };
        current.properties.insert(name.to_owned(), value);
    }
    let new_name = cx.field("new_name").trim();
    if !new_name.is_empty() {
        if current.properties.contains_key(new_name) {
            return Err(format!("{new_name}: the entity has this property already"));
        }
        let mut value = values::parse(cx.field("new_type"), cx.field("new_value"))
            .map_err(|e| format!("{new_name}: {e}"))?;
        set_indexed(&mut value, !cx.field("new_indexed").is_empty());
        current.properties.insert(new_name.to_owned(), value);
    }
    Ok(current)
}

async fn commit(
    cx: &Context<'_>,
    partition: &pb::PartitionId,
    mutation: pb::mutation::Operation,
) -> Result<pb::CommitResponse, Status> {
    cx.service
        .commit(pb::CommitRequest {
            project_id: partition.project_id.clone(),
            database_id: partition.database_id.clone(),
            mode: pb::commit_request::Mode::NonTransactional as i32,
            mutations: vec![pb::Mutation {
                operation: Some(mutation),
                ..pb::Mutation::default()
            }],
            ..pb::CommitRequest::default()
        })
        .await
}

/// `POST /console/{project}/entity`: the form's edits written in one commit, over the entity
/// as it is stored now; or a new entity.
pub(super) async fn save(cx: &Context<'_>, project: &str) -> Answer {
    let Some(key) = key_from_param(cx.field("key")) else {
        return save_new(cx, project).await;
    };
    let partition = key.partition_id.clone().unwrap_or_default();
    let current = match lookup(cx, &key).await {
        Ok(Some(entity)) => entity,
        Ok(None) => {
            return show_entity(cx, &key, "", StatusCode::NOT_FOUND).await;
        }
        Err(status) => return failed(&status, &path_text(&key), &trail_of(&partition, None)),
    };
    let entity = match edited(cx, current) {
        Ok(entity) => entity,
        Err(reason) => {
            return show_entity(
                cx,
                &key,
                &notice(true, &format!("Not saved: {reason}")),
                StatusCode::BAD_REQUEST,
            )
            .await;
        }
    };
    match commit(cx, &partition, pb::mutation::Operation::Upsert(entity)).await {
        Ok(_) => Answer::Redirect(format!("{}&saved=1", entity_href(&key))),
        Err(status) => {
            show_entity(
                cx,
                &key,
                &notice(true, &format!("Not saved: {}", status.message())),
                StatusCode::BAD_REQUEST,
            )
            .await
        }
    }
}

async fn save_new(cx: &Context<'_>, project: &str) -> Answer {
    let partition = cx.partition(project);
    let kind = cx.field("kind");
    let trail = trail_of(&partition, Some(kind));
    let id_or_name = cx.field("id_or_name").trim();
    let id_type = match id_or_name {
        "" => None,
        text => Some(match text.parse::<i64>() {
            Ok(id) if id > 0 => IdType::Id(id),
            _ => IdType::Name(text.to_owned()),
        }),
    };
    let key = pb::Key {
        partition_id: Some(partition.clone()),
        path: vec![pb::key::PathElement {
            kind: kind.to_owned(),
            id_type,
        }],
    };
    let entity = match edited(
        cx,
        pb::Entity {
            key: Some(key),
            ..pb::Entity::default()
        },
    ) {
        Ok(entity) => entity,
        Err(reason) => {
            return Answer::Page(
                StatusCode::BAD_REQUEST,
                page(
                    &format!("New {kind}"),
                    &trail,
                    &notice(true, &format!("Not saved: {reason}")),
                ),
            );
        }
    };
    let given = entity.key.clone();
    match commit(cx, &partition, pb::mutation::Operation::Insert(entity)).await {
        Ok(response) => {
            let written = response
                .mutation_results
                .into_iter()
                .next()
                .and_then(|r| r.key)
                .or(given);
            match written {
                Some(key) if key.path.last().is_some_and(|e| e.id_type.is_some()) => {
                    Answer::Redirect(format!("{}&saved=1", entity_href(&key)))
                }
                _ => Answer::Redirect(kind_href(&partition, kind)),
            }
        }
        Err(status) => failed(&status, &format!("New {kind}"), &trail),
    }
}

/// `/console/{project}/entity/delete?key=…`: asks before deleting.
pub(super) async fn confirm_delete(cx: &Context<'_>, project: &str) -> Answer {
    let trail = [(project_href(project), project.to_owned())];
    let Some(key) = key_from_param(cx.param("key")) else {
        return Answer::Page(
            StatusCode::BAD_REQUEST,
            page(
                "Delete",
                &trail,
                &notice(true, "This link does not name a key."),
            ),
        );
    };
    let body = format!(
        "<p>Delete <code>{}</code>? This cannot be undone.</p>\
         <form method=\"post\" action=\"/console/{}/entity/delete\">{}\
         <input type=\"hidden\" name=\"key\" value=\"{}\">\
         <button type=\"submit\" class=\"danger\">Delete</button> {}</form>",
        escape(&path_text(&key)),
        escape(&html::component(project)),
        cx.hidden_token(),
        escape(&key_param(&key)),
        link(&entity_href(&key), "Cancel")
    );
    ok("Delete", &trail, &body)
}

/// `POST /console/{project}/entity/delete`: deletes the entity, back to its kind.
pub(super) async fn delete(cx: &Context<'_>, project: &str) -> Answer {
    let trail = [(project_href(project), project.to_owned())];
    let Some(key) = key_from_param(cx.field("key")) else {
        return Answer::Page(
            StatusCode::BAD_REQUEST,
            page(
                "Delete",
                &trail,
                &notice(true, "This form does not name a key."),
            ),
        );
    };
    let partition = key.partition_id.clone().unwrap_or_default();
    let kind = key.path.last().map_or(String::new(), |e| e.kind.clone());
    match commit(cx, &partition, pb::mutation::Operation::Delete(key)).await {
        Ok(_) => Answer::Redirect(kind_href(&partition, &kind)),
        Err(status) => failed(&status, "Delete", &trail),
    }
}
