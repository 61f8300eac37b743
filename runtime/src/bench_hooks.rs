//! What benchmarks time that users never call (`benches/`): an entity's stored form, and a
//! commit request and a lookup answer in the service's messages, each as the backends build
//! and read them. Hidden from the documentation; not a public API. Part of the façade, with
//! `lib.rs`.

#[cfg(feature = "cloud")]
use gcloud_sdk::google::datastore::v1 as pb;

use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::key::RawKey;
use datastore_entity_core::model::value::PropertyMap;

/// `entity` in the embedded engine's stored form: the bytes a put writes for it (followed, in
/// the engine's entities table, by its times).
///
/// ```
/// # use datastore_entity::prelude::*;
/// use datastore_entity::bench_hooks::{from_stored_form, stored_form};
///
/// #[derive(Entity, Debug, PartialEq)]
/// struct Note {
///     #[key]
///     id: KeyId,
///     text: String,
/// }
///
/// let note = Note { id: KeyId::new(1)?, text: "kept".into() };
/// let bytes = stored_form(&note)?;
/// assert_eq!(from_stored_form::<Note>(Note::key(KeyId::new(1)?).raw(), &bytes)?, note);
/// # Ok::<(), Error>(())
/// ```
pub fn stored_form<E: Entity>(entity: &E) -> Result<Vec<u8>, Error> {
    entity.to_properties().map(PropertyMap::into_stored_bytes)
}

/// `E` from its stored form under `key`: what a get converts back.
pub fn from_stored_form<E: Entity>(key: &RawKey, bytes: &[u8]) -> Result<E, Error> {
    E::from_stored(key, bytes)
}

/// The stored form of `properties`, as the engine writes a map.
pub fn stored_map_form(properties: &PropertyMap) -> Vec<u8> {
    properties.clone().into_stored_bytes()
}

/// `E` from its stored form under `key`, read through a map over the bytes, decoded (what
/// entities whose fields one pass in name order cannot read go through), not in one pass:
/// the reference the one-pass read is compared with.
pub fn from_stored_map<E: Entity>(key: &RawKey, bytes: &[u8]) -> Result<E, Error> {
    let properties = PropertyMap::from_stored(bytes.to_vec())
        .map_err(|_| Error::storage("a stored entity is malformed".to_owned()))?;
    // A lookup decodes the map: read from then on, it is no longer the stored form unread.
    let _ = properties.get("");
    E::from_entity(key, properties)
}

/// The `CommitRequest` the cloud backend sends to upsert `entities` in project `project_id`,
/// checked as its commit checks them.
#[cfg(feature = "cloud")]
pub fn commit_request<E: Entity>(
    project_id: &str,
    entities: &[E],
) -> Result<pb::CommitRequest, Error> {
    crate::backend::cloud::hooks::commit_request(project_id, entities)
}

/// The entities a `LookupResponse` of project `project_id` holds, read as the cloud backend
/// reads them.
#[cfg(feature = "cloud")]
pub fn entities_from_lookup<E: Entity>(
    project_id: &str,
    response: pb::LookupResponse,
) -> Result<Vec<E>, Error> {
    crate::backend::cloud::hooks::entities_from_lookup(project_id, response)
}
