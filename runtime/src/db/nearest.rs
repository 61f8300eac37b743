//! Nearest-neighbour searches on a typed query: `find_nearest` on a `Vector` property, a
//! distance threshold, and the results with their distances.

use datastore_entity_core::error::Error;
use datastore_entity_core::model::entity::Entity;
use datastore_entity_core::model::scalar::{Vector, VectorField};
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::descriptor::PropertyPath;
use datastore_entity_core::query::spec::{Distance, FindNearest};
use datastore_entity_core::query_rule::QueryRule;

use super::query::Query;

impl<E: Entity> Query<E> {
    /// The `limit` entities whose vector `property` is nearest `vector` by `measure`, nearest
    /// first (1 to 100: the service's bound); the filters choose among them, and the query
    /// takes no order nor `limit` of its own. Only entities whose vector has `vector`'s
    /// dimension are found. It needs a vector index of the property, pre-filtered on the
    /// properties the query filters on (`#[vector_index(n)]`, `#[entity(index(..., vector))]`):
    /// the service answers from it, and the embedded engine in strict index mode refuses a
    /// search none serves (it measures every entity the filters keep).
    ///
    /// ```
    /// # use datastore_entity::prelude::*;
    /// use datastore_entity::{Distance, Vector};
    ///
    /// #[derive(Entity, Debug, Clone, PartialEq)]
    /// struct Doc { #[key] id: KeyName, #[vector_index(2)] emb: Vector }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let db = Db::in_memory();
    /// for (id, v) in [("east", [1.0, 0.0]), ("north", [0.0, 1.0]), ("west", [-1.0, 0.0])] {
    ///     db.put(&Doc { id: KeyName::new(id)?, emb: Vector::new(v.to_vec())? }).await?;
    /// }
    /// let near = Vector::new(vec![0.9, 0.1])?;
    /// let found = db.query::<Doc>().find_nearest(Doc::EMB, &near, Distance::Euclidean, 2)
    ///     .fetch_with_distance().await?;
    /// assert_eq!(found[0].0.id.as_str(), "east");
    /// assert_eq!(found[1].0.id.as_str(), "north");
    /// assert!(found[0].1 < found[1].1);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// A query vector of another dimension than the property's `#[vector_index(n)]` is
    /// refused ([`Error::InvalidQuery`]): it could find nothing.
    pub fn find_nearest<T: VectorField, I>(
        mut self,
        property: PropertyPath<E, T, I>,
        vector: &Vector,
        measure: Distance,
        limit: usize,
    ) -> Self {
        let name = property.name();
        if let Some(index) = E::SCHEMA
            .vector_indexes
            .iter()
            .find(|index| index.property == name)
            .filter(|index| usize::try_from(index.dimension) != Ok(vector.dimension()))
        {
            self.refuse(QueryRule::VectorDimension {
                property: name.to_owned(),
                given: vector.dimension(),
                declared: u64::from(index.dimension),
            });
        }
        self.spec.find_nearest = Some(FindNearest {
            property: name.to_owned(),
            vector: vector.clone(),
            measure,
            limit,
            distance_property: None,
            threshold: None,
        });
        self
    }

    /// Only results at most `threshold` away (Euclidean, cosine) or with a dot product of at
    /// least `threshold`, for a query with [`find_nearest`](Query::find_nearest).
    /// A threshold that is not a finite number is refused, as the service refuses it.
    pub fn distance_threshold(mut self, threshold: f64) -> Self {
        match &mut self.spec.find_nearest {
            Some(nearest) => nearest.threshold = Some(threshold),
            None => self.refuse(QueryRule::NeedsFindNearest {
                option: "distance_threshold",
            }),
        }
        self
    }

    /// Runs a [`find_nearest`](Query::find_nearest) query: each entity with its distance,
    /// nearest first.
    pub async fn fetch_with_distance(mut self) -> Result<Vec<(E, f64)>, Error> {
        const DISTANCE: &str = "datastore_entity_distance";
        match &mut self.spec.find_nearest {
            Some(nearest) => nearest.distance_property = Some(DISTANCE.to_owned()),
            None => self.refuse(QueryRule::NeedsFindNearest {
                option: "fetch_with_distance",
            }),
        }
        let batch = self.run().await?;
        let mut rows = Vec::with_capacity(batch.results.len());
        let mut distances = Vec::with_capacity(batch.results.len());
        for mut result in batch.results {
            let distance = match result.properties.remove(DISTANCE).map(|p| p.value) {
                Some(Value::Double(d)) => d,
                Some(Value::Integer(i)) => i as f64,
                other => {
                    return Err(Error::Decode {
                        key: Some(format!("{:?}", result.key).into()),
                        kind: E::KIND.to_owned(),
                        property: DISTANCE.to_owned(),
                        expected: "the distance (a double)".to_owned(),
                        found: other
                            .as_ref()
                            .map_or("nothing", Value::type_name)
                            .to_owned(),
                    });
                }
            };
            rows.push((result.key, result.properties));
            distances.push(distance);
        }
        let entities = self.entities(rows).await?;
        entities
            .into_iter()
            .zip(distances)
            .map(|(entity, d)| Ok((entity?, d)))
            .collect()
    }
}
