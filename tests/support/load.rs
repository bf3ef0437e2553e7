//! Load against a running daemon, for the durability tests: CPU hogs beside it, senders
//! posting as fast as it answers and counting what was acknowledged, and what a restart holds.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;

use super::collector::*;

/// Busy processes beside the daemon, one per core; killed (by their own handles) on drop.
pub struct Hogs(Vec<Child>);

impl Hogs {
    pub fn start() -> Self {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What the senders were told: each acknowledgement (when its answer arrived, spans), and every
/// span sent.
#[derive(Default)]
pub struct Acks {
    pub at: Mutex<Vec<(Instant, u64)>>,
    pub sent: AtomicU64,
}

impl Acks {
    /// Spans acknowledged by `t`.
    pub fn by(&self, t: Instant) -> u64 {
        let at = self.at.lock().unwrap();
        at.iter().filter(|(a, _)| *a <= t).map(|(_, n)| n).sum()
    }

    /// The latest time by which fewer than `restored` spans were acknowledged: what a restart
    /// holding `restored` spans lost is what came after it.
    pub fn covered_until(&self, restored: u64) -> Option<Instant> {
        let at = self.at.lock().unwrap();
        let mut sorted = at.clone();
        sorted.sort_by_key(|(a, _)| *a);
        let mut n = 0;
        let mut last = None;
        for (a, k) in sorted {
            n += k;
            if n > restored {
                return last;
            }
            last = Some(a);
        }
        last
    }
}

/// The load: `senders` tasks posting the requests of [`bodies`] (`spans` spans each, sizes well
/// under any ceiling) as fast as they are answered.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

pub fn bodies(spans_per_request: u64, tools: u64) -> Arc<Vec<Vec<u8>>> {
    Arc::new(
        (0..16u64)
            .map(|r| {
                let spans = (0..spans_per_request)
                    .map(|i| {
                        let n = r * spans_per_request + i;
                        own_span(
                            n,
                            &format!("tool_{}", n % tools),
                            100 + (n * 37 % 5000) as i64,
                        )
                    })
                    .collect();
                request("agent", spans).encode_to_vec()
            })
            .collect(),
    )
}

impl Load {
    pub fn start(
        http: std::net::SocketAddr,
        bodies: Arc<Vec<Vec<u8>>>,
        spans: u64,
        senders: usize,
        acks: Arc<Acks>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let client = reqwest::Client::new();
        let tasks = (0..senders)
            .map(|s| {
                let (client, bodies, acks, stop) =
                    (client.clone(), bodies.clone(), acks.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut i = s;
                    while !stop.load(Ordering::Relaxed) {
                        i += senders;
                        acks.sent.fetch_add(spans, Ordering::Relaxed);
                        let r = client
                            .post(format!("http://{http}/v1/traces"))
                            .header("content-type", "application/x-protobuf")
                            .body(bodies[i % bodies.len()].clone())
                            .timeout(Duration::from_secs(5))
                            .send()
                            .await;
                        match r {
                            Ok(r) if r.status() == 200 => {
                                acks.at.lock().unwrap().push((Instant::now(), spans));
                            }
                            Ok(_) => {}
                            // The daemon was killed.
                            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                        }
                    }
                })
            })
            .collect();
        Self { stop, tasks }
    }

    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Spans of service `agent` the daemon holds.
pub async fn held(admin: std::net::SocketAddr) -> u64 {
    tools(admin, "?service=agent").await["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["spans"].as_u64().unwrap())
        .sum()
}
