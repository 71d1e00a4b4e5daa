//! Per-agent rate limits at the edge (L4: cheap actions are bounded by rate). Exceeding a limit is
//! a rejection with `RATE_LIMITED` and `retry_after`; it creates no effect. Limits are per node and
//! in memory (the leader serves every call, so one node sees each agent's traffic).

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use kungfu_types::{Code, Micros, Rejection};
use serde::Deserialize;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;

/// Rate limit settings; 0 disables a limit.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RateSettings {
    pub writes_per_second_per_agent: u32,
    pub write_burst: u32,
    pub reads_per_second_per_agent: u32,
    pub read_burst: u32,
    pub registrations_per_minute_per_ip: u32,
}

impl Default for RateSettings {
    fn default() -> RateSettings {
        RateSettings {
            writes_per_second_per_agent: 200,
            write_burst: 400,
            reads_per_second_per_agent: 1000,
            read_burst: 2000,
            registrations_per_minute_per_ip: 60,
        }
    }
}

/// The limiters of one node.
pub struct RateLimits {
    writes: Option<DefaultKeyedRateLimiter<u64>>,
    reads: Option<DefaultKeyedRateLimiter<u64>>,
    registrations: Option<DefaultKeyedRateLimiter<IpAddr>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RateLimits")
    }
}

fn quota(per: u32, burst: u32, per_minute: bool) -> Option<Quota> {
    let rate = NonZeroU32::new(per)?;
    let q = if per_minute { Quota::per_minute(rate) } else { Quota::per_second(rate) };
    Some(q.allow_burst(NonZeroU32::new(burst.max(per)).unwrap_or(rate)))
}

fn check<K: Hash + Eq + Clone>(l: &Option<DefaultKeyedRateLimiter<K>>, key: &K, what: &str) -> Result<(), Rejection> {
    let Some(l) = l else { return Ok(()) };
    match l.check_key(key) {
        Ok(()) => Ok(()),
        Err(not_until) => {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Err(Rejection::new(Code::RateLimited, format!("too many {what}; wait and send the same request again"))
                .with_retry_after(Micros(wait.as_micros().max(1) as u64)))
        }
    }
}

impl RateLimits {
    pub fn new(s: &RateSettings) -> RateLimits {
        RateLimits {
            writes: quota(s.writes_per_second_per_agent, s.write_burst, false).map(DefaultKeyedRateLimiter::keyed),
            reads: quota(s.reads_per_second_per_agent, s.read_burst, false).map(DefaultKeyedRateLimiter::keyed),
            registrations: quota(s.registrations_per_minute_per_ip, s.registrations_per_minute_per_ip, true)
                .map(DefaultKeyedRateLimiter::keyed),
        }
    }

    pub fn write(&self, agent: u64) -> Result<(), Rejection> {
        check(&self.writes, &agent, "writes by this agent")
    }

    pub fn read(&self, agent: u64) -> Result<(), Rejection> {
        check(&self.reads, &agent, "reads by this agent")
    }

    pub fn registration(&self, ip: IpAddr) -> Result<(), Rejection> {
        check(&self.registrations, &ip, "registrations from this address")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_past_the_limit_is_refused_with_retry_after_and_other_agents_are_unaffected() {
        let l = RateLimits::new(&RateSettings {
            writes_per_second_per_agent: 1,
            write_burst: 3,
            ..RateSettings::default()
        });
        for _ in 0..3 {
            assert!(l.write(1).is_ok());
        }
        let r = l.write(1).expect_err("the fourth write in the burst is over the limit");
        assert_eq!(r.code, Code::RateLimited);
        assert!(r.retry_after.is_some_and(|m| m.0 > 0 && m.0 <= 1_000_000), "{r:?}");
        assert!(l.write(2).is_ok(), "limits are per agent");
    }

    #[test]
    fn zero_disables_a_limit() {
        let l = RateLimits::new(&RateSettings { writes_per_second_per_agent: 0, ..RateSettings::default() });
        for _ in 0..10_000 {
            assert!(l.write(1).is_ok());
        }
    }
}
