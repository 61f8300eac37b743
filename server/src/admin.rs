//! The admin API's index calls (`google.datastore.admin.v1.DatastoreAdmin`): `ListIndexes`
//! and `GetIndex` answer the composite indexes the server keeps — those `--require-indexes`
//! declared, and those its queries built on their first use — as ready indexes, the same for
//! every project. (Its exports and imports are not served.)

use datastore_entity::Direction;
use datastore_entity::backend::embedded::{Embedded, IndexDefinition};
use gcloud_sdk::google::datastore::admin::v1 as admin;
use tonic::Status;

/// `ListIndexes`: every index, `page_size` at a time (all of them for 0), from `page_token`.
pub(crate) fn list(
    engine: &Embedded,
    request: admin::ListIndexesRequest,
) -> Result<admin::ListIndexesResponse, Status> {
    if !request.filter.is_empty() {
        return Err(Status::invalid_argument(
            "This server answers ListIndexes without a filter.",
        ));
    }
    let all = engine.indexes();
    let start = match request.page_token.as_str() {
        "" => 0,
        token => token
            .parse::<usize>()
            .ok()
            .filter(|at| *at <= all.len())
            .ok_or_else(|| {
                Status::invalid_argument("The page_token is not one this server gave.")
            })?,
    };
    let size = match usize::try_from(request.page_size) {
        Ok(0) => all.len(),
        Ok(size) => size,
        Err(_) => return Err(Status::invalid_argument("The page_size is negative.")),
    };
    let end = start.saturating_add(size).min(all.len());
    Ok(admin::ListIndexesResponse {
        indexes: all[start..end]
            .iter()
            .map(|index| described(&request.project_id, index))
            .collect(),
        next_page_token: match end < all.len() {
            true => end.to_string(),
            false => String::new(),
        },
    })
}

/// `GetIndex`: the index of `index_id`.
pub(crate) fn get(
    engine: &Embedded,
    request: admin::GetIndexRequest,
) -> Result<admin::Index, Status> {
    engine
        .indexes()
        .iter()
        .find(|index| index.id == request.index_id)
        .map(|index| described(&request.project_id, index))
        .ok_or_else(|| Status::not_found(format!("No index has the id {:?}.", request.index_id)))
}

/// An index as the admin API describes it.
fn described(project: &str, index: &IndexDefinition) -> admin::Index {
    use admin::index::{AncestorMode, Direction as Order, IndexedProperty, State};
    admin::Index {
        project_id: project.to_owned(),
        index_id: index.id.clone(),
        kind: index.kind.clone(),
        ancestor: match index.ancestor {
            true => AncestorMode::AllAncestors,
            false => AncestorMode::None,
        } as i32,
        properties: index
            .properties
            .iter()
            .map(|(name, direction)| IndexedProperty {
                name: name.clone(),
                direction: match direction {
                    Direction::Ascending => Order::Ascending,
                    Direction::Descending => Order::Descending,
                } as i32,
            })
            .collect(),
        state: State::Ready as i32,
    }
}
