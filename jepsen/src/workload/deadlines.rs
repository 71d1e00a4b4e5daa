//! `deadlines`: being written.

use super::{Env, Proc, Workload};
use crate::checker::Workload as Kind;
use anyhow::Result;
use futures::FutureExt;
use futures::future::BoxFuture;

#[derive(Debug, Default)]
pub struct Deadlines {}

impl Workload for Deadlines {
    fn kind(&self) -> Kind {
        Kind::Deadlines
    }
    fn setup<'a>(&'a mut self, _env: &'a Env, _processes: usize) -> BoxFuture<'a, Result<()>> {
        async move { anyhow::bail!("the deadlines workload is not written yet") }.boxed()
    }
    fn step<'a>(&'a self, _env: &'a Env, _p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {}.boxed()
    }
    fn final_reads<'a>(&'a self, _env: &'a Env, _next: u64) -> BoxFuture<'a, Result<()>> {
        async move { Ok(()) }.boxed()
    }
}
