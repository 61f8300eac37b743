//! Query Explain with its statistics: a query or an aggregation answered as a transaction
//! reads it, and what it read counted.

use super::State;
use super::aggregate::Plan;
use super::answer::{Counting, Tally};
use crate::backend::TransactionId;
use datastore_entity_core::error::Error;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::explain::Explanation;
use datastore_entity_core::query::spec::{Aggregation, QueryBatch, QuerySpec};

impl State {
    /// How `query` is answered, and with `analyze` its answer (read as `transaction` reads)
    /// and what it read.
    pub(super) fn explain(
        &mut self,
        query: &QuerySpec,
        analyze: bool,
        transaction: Option<&TransactionId>,
    ) -> Result<(Option<QueryBatch>, Explanation), Error> {
        let mut explanation = self.answers().plan(query)?;
        if !analyze {
            return Ok((None, explanation));
        }
        let tally = Tally::default();
        let batch = self.counted_query(query, transaction, Some(&tally))?;
        explanation.stats = Some(tally.stats(batch.results.len()));
        Ok((Some(batch), explanation))
    }

    /// How an aggregation over `query` is answered (the plan of the rows it reads), and with
    /// `analyze` its value and what it read.
    pub(super) fn explain_aggregation(
        &mut self,
        query: &QuerySpec,
        aggregation: &Aggregation,
        analyze: bool,
        transaction: Option<&TransactionId>,
    ) -> Result<(Option<Value>, Explanation), Error> {
        let mut explanation = self.answers().plan(Plan::new(query, aggregation)?.rows())?;
        if !analyze {
            return Ok((None, explanation));
        }
        let tally = Tally::default();
        let value = self.aggregate(query, aggregation, transaction, Some(&tally))?;
        explanation.stats = Some(tally.stats(1));
        Ok((Some(value), explanation))
    }

    /// `query`'s answer as [`run_query`](State::run_query) gives it, what it read counted in
    /// `tally`, if given.
    fn counted_query(
        &mut self,
        query: &QuerySpec,
        transaction: Option<&TransactionId>,
        tally: Option<&Tally>,
    ) -> Result<QueryBatch, Error> {
        let Some(tally) = tally else {
            return self.run_query(query, transaction);
        };
        let version = self.read_version(transaction, false)?;
        let batch = self
            .answers()
            .answer(&Counting::new(&self.view(version), tally), query)?;
        self.finish_query(query, transaction, batch)
    }

    /// An aggregation over the rows of `query`, read from the indexes ([`Plan`]):
    /// a count reads keys only (outside a transaction, only index entries), a sum or an
    /// average the property's index values.
    /// What it read is counted in `tally`, if given.
    pub(super) fn aggregate(
        &mut self,
        query: &QuerySpec,
        aggregation: &Aggregation,
        transaction: Option<&TransactionId>,
        tally: Option<&Tally>,
    ) -> Result<Value, Error> {
        let plan = Plan::new(query, aggregation)?;
        self.build_needed(plan.rows())?;
        match plan {
            Plan::Count { rows, keys_only } => {
                // Outside a transaction (which records the rows it read), count index entries.
                let counted = match transaction {
                    None if keys_only => match tally {
                        Some(tally) => {
                            let store = Counting::new(&*self.store, tally);
                            self.answers().count(&store, &rows)?
                        }
                        None => self.answers().count(&*self.store, &rows)?,
                    },
                    _ => None,
                };
                let counted = match counted {
                    Some(counted) => counted,
                    None => self.counted_query(&rows, transaction, tally)?.results.len(),
                };
                Ok(Value::Integer(i64::try_from(counted).unwrap_or(i64::MAX)))
            }
            Plan::Fold(fold) => {
                let batch = self.counted_query(&fold.rows, transaction, tally)?;
                Ok(fold.over(&batch))
            }
        }
    }
}
